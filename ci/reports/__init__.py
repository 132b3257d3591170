"""Reports: one model assembled from the store (``model``), rendered as text, Markdown and JSON
(``text``) and as mail (``mail``); the dashboard renders the same model as HTML."""
