"""Errors the store reports as one line to the user."""
from analyzer.errors import SizewatchError


class StoreError(SizewatchError):
    """The store cannot be opened or used (corrupt file, unknown id...): a one-line message."""
