"""The deployment mode's build queue: RQ on Redis.

A job is one ``ci.pipeline.run.BuildJob`` (commit × toolchain × config, its targets), run by a
worker with ``ci.pipeline.run.run_job``, the code path ``build_all`` uses in-process, and written
straight into the store (one transaction per build). The store is the source of truth: the
coordinator (``coordinator``) waits on the store, not on RQ's results, re-enqueues what the queue
lost, and reports jobs parked after their attempts. ``names`` (connections, queue and job names),
``wire`` (jobs as JSON, and the job class that runs ``jobs.execute`` only), ``jobs`` (what runs in a worker), ``worker`` (``sizewatch worker``), ``status`` (``sizewatch queue
status``).
"""
