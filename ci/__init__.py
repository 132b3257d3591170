"""Continuous integration: the per-commit pipeline (and, later, the mailing-list bot)."""
