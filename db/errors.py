"""Errors the store reports as one line to the user."""
from analyzer.errors import SizewatchError


class StoreError(SizewatchError):
    """The store cannot be opened or used (corrupt file, unknown id...): a one-line message."""


class NoStoreYet(StoreError):
    """A reader found the database but no store in it yet: a writer (``run``, ``bot``, a worker) makes
    it. A service started beside its writers (compose) may wait for it."""
