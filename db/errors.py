"""Errors the store reports as one line to the user."""


class StoreError(Exception):
    """The store cannot be opened or used (corrupt file, unknown id...): a one-line message."""
