"""Errors a user can cause and fix: the command line prints them as one line and exits with status 2.

Everything else that raises is a bug and keeps its traceback.
"""

from __future__ import annotations


class UserError(Exception):
    """Bad input from the user (a config value, a run id, a path); the message names it."""


class ConfigError(UserError, ValueError):
    """A configuration key or value is wrong; the message names the key, the value and what is allowed."""


class MissingPathError(UserError, FileNotFoundError):
    """A file or directory the user named (or that a command needs) does not exist."""


def first_line(error: BaseException, empty: str | None = None) -> str:
    """The first line of ``error``'s message, for a one-line user error (``empty``, else the error's type name, when
    the message is blank)."""
    text = str(error).strip()
    return text.splitlines()[0] if text else (empty if empty is not None else type(error).__name__)
