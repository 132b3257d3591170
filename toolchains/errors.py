"""Errors the build layer reports as one line to the user."""


class BuildError(Exception):
    """A build-side failure with a message fit for one line on stderr."""
