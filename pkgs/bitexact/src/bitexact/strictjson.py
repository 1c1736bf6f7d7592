"""JSON as bitexact reads it, for every input kind (prompts, recipes, goldens, history lines, build info,
and engines' answers): standard JSON only (no NaN or Infinity literals; an engine's answer may hold them,
for answers.py to name), no key given twice in one object (Python's json keeps the last one silently:
two `output_ids` in one answer would compare whichever came last), no number of more digits than Python
reads (a ValueError of its own, not a JSON error), and JSON Lines split where the format splits them:
at "\\n" only. Python's `str.splitlines()` also breaks at U+2028, U+0085, "\\x1c" and other characters
that JSON allows raw inside a string, so a valid line holding one would be read as two broken ones."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any


class StrictJSONError(ValueError):
    """Not standard JSON, or an object with a key given twice; the message says which and where."""


class UnreadableJSONError(StrictJSONError):
    """Whole JSON that still cannot be read one way: a key given twice, a number too long to read. Not
    a transfer cut short, so asking again would only get it again."""


def _no_constant(name: str) -> Any:
    raise StrictJSONError(f"non-standard JSON constant {name} (a number that is not finite)")


def unique(pairs: list[tuple[str, Any]], twice: Callable[[str], Exception]) -> dict[str, Any]:
    """`pairs` as a dict; `twice(key)` is raised for a key given twice (a dict would keep the last)."""
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise twice(key)
        found[key] = value
    return found


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    return unique(
        pairs,
        lambda key: UnreadableJSONError(
            f"the key {key!r} is given twice in one object (which one is meant?)"
        ),
    )


def _constant(name: str) -> float:
    return float(name)


def loads(text: str | bytes, *, non_finite: bool = False) -> Any:
    """One JSON document; StrictJSONError (a ValueError) for anything but standard, unambiguous JSON.
    `non_finite`: NaN and the infinities are read as floats (an engine's answer, whose broken numerics
    answers.py names); everything else stays refused."""
    try:
        return json.loads(
            text,
            parse_constant=_constant if non_finite else _no_constant,
            object_pairs_hook=_no_duplicates,
        )
    except json.JSONDecodeError as error:
        raise StrictJSONError(f"not JSON ({error.msg} at line {error.lineno} column {error.colno})") from None
    except RecursionError:
        raise StrictJSONError("not JSON this reader can hold (nested too deeply)") from None
    except StrictJSONError:
        raise
    except ValueError as error:  # int(): "Exceeds the limit (4300 digits) for integer string conversion"
        raise UnreadableJSONError(f"a number too long to read ({error})") from None


def lines(text: str) -> list[tuple[int, str]]:
    """(line number from 1, line) of a JSON Lines text, split at "\\n" only (a "\\r" before it is JSON
    whitespace, so Windows line ends read too); lines of JSON whitespace only are left out, their numbers
    kept."""
    return [(number, line) for number, line in enumerate(text.split("\n"), 1) if line.strip(" \t\r")]
