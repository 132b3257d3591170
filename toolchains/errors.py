"""Errors the build layer reports as one line to the user."""
from analyzer.errors import SizewatchError


class BuildError(SizewatchError):
    """A build-side failure with a message fit for one line on stderr."""
