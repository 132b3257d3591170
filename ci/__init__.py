"""What runs per commit and per mail: the pipeline (``ci.pipeline``), the reports it prints
(``ci.reports``) and the mailing-list bot (``ci.bot``)."""
