"""JSON as RFC 8259 defines it, read strictly: a key given twice in one object is refused (Python's json
keeps the last one silently, so a second `no-spec` would replace the first), and so are NaN and
Infinity, which are not JSON. Messages name the key and the lines where it appears."""

from __future__ import annotations

import json
import re
from typing import Any


class JsonProblem(ValueError):
    """The text is not strict JSON; the message says why and where."""


class _Twice(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Twice(key)
        out[key] = value
    return out


def _no_constant(name: str) -> Any:
    raise JsonProblem(f"{name} is not JSON (write a number, or a string)")


def _key_lines(text: str, key: str) -> list[int]:
    """The lines on which `key` appears as an object key (a hint: the same key may serve other objects)."""
    pattern = re.compile(re.escape(json.dumps(key)) + r"\s*:")
    return [text.count("\n", 0, m.start()) + 1 for m in pattern.finditer(text)]


def loads(text: str) -> Any:
    """The parsed value of `text`; JsonProblem for invalid JSON, a repeated key, NaN or Infinity."""
    try:
        return json.loads(text, object_pairs_hook=_unique, parse_constant=_no_constant)
    except _Twice as twice:
        lines = sorted(set(_key_lines(text, twice.key)))
        at = (
            f" (lines {', '.join(map(str, lines))})"
            if len(lines) > 1
            else f" (line {lines[0]})"
            if lines
            else ""
        )
        raise JsonProblem(
            f"key {json.dumps(twice.key)} is given twice in one object{at}: JSON readers keep only one of "
            "them, so remove or rename the other"
        ) from None
    except json.JSONDecodeError as error:
        raise JsonProblem(f"not valid JSON ({error})") from None
    except RecursionError:
        raise JsonProblem("not readable JSON: nested too deeply") from None
