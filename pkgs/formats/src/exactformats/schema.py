"""One schema check for every versioned file bitexact, the launcher and pinlock read (recipes, goldens,
history lines, golden families): the `schema` a file declares is one of three things besides a number
the reader reads, each with its own fix:

- newer: a whole number above the newest the reader knows. The file was written by (or for) a newer
  program; the fix is to upgrade the reader, never to rewrite the file.
- older: a whole number below the oldest the reader knows; the fix is the caller's (a golden is
  recorded again, a recipe is taken from the flake it came with).
- malformed: not a whole number at all. JSON has one number type, and Python reads `1.0` as a float that
  equals 1 and `true` as a bool that equals 1, so both would pass an `==` test; they are named here, with
  the number to write instead (a formatter that rewrites numbers, or a hand edit, makes them)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from exactformats.files import FormatError

# The recipe file formats (nix/recipes/*.json "schema") that bitexact, the launcher and pinlock read: one
# list, so the three programs take and refuse the same recipes. A newer schema may mean what a reader of
# these would silently get wrong.
RECIPE_SCHEMAS = (1,)


def _as_json(value: object) -> str:
    try:
        return json.dumps(value)[:60]
    except (TypeError, ValueError):
        return repr(value)[:60]


def _reads(known: Sequence[int]) -> str:
    return f"schema {known[0]}" if len(known) == 1 else f"schemas {', '.join(map(str, known))}"


def schema_problem(
    value: object,
    known: Sequence[int],
    what: str,
    *,
    reader: str,
    older: str,
    newer: str | None = None,
) -> str | None:
    """Why `value` (the file's `schema`, None when absent) is not one of `known`, in words with the fix;
    None when it is. `what` names the file, `reader` the program reading it, `older` the fix for a schema
    below the oldest known, `newer` (default: upgrade `reader`) the fix for one above the newest."""
    known = sorted(known)
    reads = _reads(known)
    if value is None:
        return (
            f"{what} has no `schema`: every file of this kind names its schema ({reader} reads {reads}); "
            f'is this the right file? If it is, add "schema": {known[-1]}'
        )
    if isinstance(value, bool):
        return (
            f"{what}: `schema` is {_as_json(value)}, a boolean, not a schema number; "
            f'{reader} reads {reads}: write "schema": {known[-1]}'
        )
    if isinstance(value, float):
        if value.is_integer() and int(value) in known:
            return (
                f"{what}: `schema` is {_as_json(value)}, a decimal; a schema is a whole number: write "
                f'"schema": {int(value)} (a tool that rewrites numbers as decimals made it {_as_json(value)})'
            )
        return f"{what}: `schema` is {_as_json(value)}, not a whole number; {reader} reads {reads}"
    if isinstance(value, str):
        stripped = value.strip()
        if stripped.isascii() and stripped.isdigit() and int(stripped) in known:
            return (
                f"{what}: `schema` is the string {_as_json(value)}; a schema is a number: write "
                f'"schema": {int(stripped)} (without quotes)'
            )
        return (
            f"{what}: `schema` is the string {_as_json(value)}, not a schema number; {reader} reads {reads}"
        )
    if not isinstance(value, int):
        return f"{what}: `schema` is {_as_json(value)}, not a schema number; {reader} reads {reads}"
    if value in known:
        return None
    if value > known[-1]:
        fix = (
            newer or f"upgrade {reader} to one that reads it (the {reader} of the flake that wrote the file)"
        )
        return (
            f"{what} has schema {value}: it was written by a newer {reader} (this one reads {reads}); {fix}"
        )
    if value < known[0]:
        return f"{what} has schema {value}, older than this {reader} reads ({reads}); {older}"
    return f"{what} has schema {value}, which no {reader} writes (this one reads {reads}); {older}"


def check_schema(
    value: object,
    known: Sequence[int],
    what: str,
    *,
    reader: str,
    older: str,
    newer: str | None = None,
) -> int:
    """`value` when it is one of `known`; otherwise FormatError (kind "schema") with schema_problem's
    message: newer, older or malformed, each with its fix."""
    problem = schema_problem(value, known, what, reader=reader, older=older, newer=newer)
    if problem is not None:
        raise FormatError(problem, "schema")
    assert isinstance(value, int)
    return value
