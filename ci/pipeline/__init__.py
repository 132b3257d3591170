"""The per-commit pipeline: plan (commits), build, analyze and store, compare with the parent.

``run`` is the whole of ``sizewatch run``; the bot drives the same stages for each series.
"""
from ci.pipeline.plan import RunPlan, plan_messages, plan_range, plan_series
from ci.pipeline.run import RunStats, build_all, compare_all, report, run

__all__ = ["RunPlan", "RunStats", "build_all", "compare_all", "plan_messages", "plan_range", "plan_series", "report", "run"]
