"""Writing a command's output: quietly stopped by a closed pipe, and a fast exit for big outputs.

Kept apart from ``cli.common`` because it must not import click: ``sizediff``'s bloat-o-meter
path runs without it (~20 ms of a vmlinux diff).
"""
from __future__ import annotations

import os
import sys


def emit(text: str) -> None:
    """Write ``text`` to stdout; a closed pipe ends the command quietly."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        # the reader is gone: point stdout at /dev/null so the interpreter's final flush is silent
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def emit_and_exit(text: str) -> None:
    """Print the output and leave at once, skipping the interpreter's teardown of ~150k symbol
    strings on a vmlinux (~20 ms)."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        pass
    os._exit(0)
