"""Values as reports show them: floats exact (the shortest text that reads back to the same double,
so two values that differ never print alike), no Python reprs (`True`, `None`, `{...}`)."""

from __future__ import annotations

import json
from typing import Any


def text(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return repr(value)  # shortest round-trip form: -3.3816399574279785, never -3.38164
    if isinstance(value, dict):
        inner = ", ".join(f"{k}={text(v)}" for k, v in value.items())
        return f"({inner})" if inner else "-"
    if isinstance(value, list | tuple):
        return ", ".join(text(v) for v in value) or "-"
    return str(value)


def pair(a: Any, b: Any) -> str:
    return f"{text(a)} / {text(b)}"


def ulps(count: int | None, fmt: str | None) -> str:
    return "-" if count is None else f"{count} ({fmt})"


def quoted(s: str) -> str:
    """Decoded model text, quoted with its control characters escaped (newlines stay visible)."""
    return json.dumps(s, ensure_ascii=False)


def settings_text(settings: dict[str, Any]) -> str:
    return ", ".join(f"{k.replace('_', ' ')} {text(v)}" for k, v in settings.items())


def identity_text(identity: dict[str, Any], skip: tuple[str, ...] = ("launch_command",)) -> str:
    return ", ".join(f"{k}={text(v)}" for k, v in identity.items() if k not in skip)


def compared_text(compared: dict[str, Any]) -> str:
    """What a verdict compared, in the words every report and verdict line uses."""
    top = f"top-{compared['top_k']}"
    what = (
        f"every token id, logprob and {top} alternative (id and logprob)"
        if compared["alternatives"] == "ids and logprobs"
        else f"every token id and logprob, and the logprobs of the {top} alternatives (the server names "
        "them by text, so their ids were not compared)"
    )
    prompts = f"{compared['answers']} {compared['unit']}{'s' if compared['answers'] != 1 else ''}"
    stopped = compared.get("stopped") or 0  # absent from summaries of older bitexact runs
    short = (
        f" ({stopped} of them stopped before the {compared['asked']} tokens asked, with a stop reason)"
        if stopped
        else ""
    )
    return (
        f"{what} at {compared['positions']} position{'s' if compared['positions'] != 1 else ''} of {prompts}"
        f"{short}"
    )


def not_argmax_text(summary: dict[str, Any]) -> str:
    """The verdict line's word on chosen tokens that are not their engine's reported argmax (summary.py)."""
    found = summary.get("not_argmax") or []
    if not found:
        return ""
    first = found[0]
    return (
        f"; {len(found)} chosen tokens are not their engine's reported argmax (first: side {first['side']}, "
        f"prompt {first['prompt_id']!r}, position {first['position']}: chose {first['chosen']}, reported "
        f"argmax {first['argmax']}, {first['kind']}), a difference in that engine's numerics, shown in the "
        "report"
    )
