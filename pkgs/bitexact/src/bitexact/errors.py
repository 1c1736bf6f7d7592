"""Errors that end a run with exit code 2 (the contract's 'anything else')."""

from __future__ import annotations


class BitexactError(Exception):
    """Base class: the message is printed as is, the process exits 2."""


class UsageError(BitexactError):
    """Bad command line or bad input file."""


class EngineError(BitexactError):
    """The engine failed, stopped answering, or answered something we cannot read."""


class SpecNotRunError(BitexactError):
    """A run that must speculate shows no sign that speculation ran (or one that must not, did)."""


class GoldenError(BitexactError):
    """A golden record is missing, corrupted, or belongs to another card or recipe."""
