"""The project's exception base for failures a user can act on.

A `UserError`'s message is one line that names the thing at fault and the fix; the command line prints it alone and
exits 1. Anything else that escapes a command is an internal error and keeps its traceback (docs/DESIGN.md).
"""

from __future__ import annotations


class UserError(Exception):
    """Bad input or an unreachable server: the message says what and how to fix it."""


class InputError(UserError, ValueError):
    """An argument, file or name the user gave is wrong (a ValueError too, for callers that catch those)."""
