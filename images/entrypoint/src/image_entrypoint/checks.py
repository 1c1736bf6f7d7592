"""The error every preflight step raises: one message for the user, naming what is wrong and the fix."""

from __future__ import annotations


class PreflightError(Exception):
    """A reason not to start the server; `str(error)` is the message printed before exiting with 2."""
