"""The sizewatch dashboard: server-rendered Flask pages over the result store (``sizewatch serve``)."""
from web.app import create_app

__all__ = ["create_app"]
