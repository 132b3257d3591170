"""Errors the analysis layer reports as one line to the user."""


class InputError(Exception):
    """Bad input (missing, not ELF, truncated, stripped...): a one-line message, never a traceback."""
