"""Errors the build layer reports as one line to the user."""
from analyzer.errors import SizewatchError


class BuildError(SizewatchError):
    """A build-side failure with a message fit for one line on stderr."""


class InfrastructureError(BuildError):
    """The build could not run at all on this machine: the memory limit could not be set, the
    sandbox did not start, the disk is full. Never the patch's fault: nothing is stored as the
    build's result, and the bot retries the series later instead of mailing its author."""
