"""The machine-readable summary of a comparison (what --json prints and the reports render)."""

from __future__ import annotations

from typing import Any

from bitexact.compare import compare
from bitexact.generation import Generation


def comparison_summary(
    *,
    verb: str,
    title: str,
    a: dict[str, Any],
    b: dict[str, Any],
    settings: dict[str, Any],
    gens_a: list[Generation],
    gens_b: list[Generation],
) -> dict[str, Any]:
    comps = [compare(x, y).to_json() for x, y in zip(gens_a, gens_b, strict=True)]
    return {
        "verb": verb,
        "title": title,
        "a": a,
        "b": b,
        "settings": settings,
        "prompts": len(comps),
        "equal": sum(c["equal"] for c in comps),
        "differ": sum(not c["equal"] for c in comps),
        "tokens_differ": sum(not c["tokens_equal"] for c in comps),
        "comparisons": comps,
    }
