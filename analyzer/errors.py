"""The one error convention of every sizewatch command.

Every failure a user can cause or meet (bad input, a build that cannot be set up, a
store that cannot be used, a mail relay that refuses) is a ``SizewatchError``: its
message is one line, and the command layer (``cli``) prints it as ``sizewatch: ...``
and exits 1. Anything else is a bug and keeps its traceback. Each layer has its own
subclass so callers can tell where it came from; the base lives here, in the lowest
layer, so every layer can derive from it without importing upwards.
"""


class SizewatchError(Exception):
    """A failure fit for one line on stderr: never a traceback."""


class InputError(SizewatchError):
    """Bad input (missing, not ELF, truncated, stripped...): a one-line message, never a traceback."""
