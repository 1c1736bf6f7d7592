"""The machine-readable summary of a comparison (what --json prints and the reports render)."""

from __future__ import annotations

from typing import Any

from bitexact.answers import not_argmax
from bitexact.compare import compare
from bitexact.generation import Generation
from bitexact.prompts import Tokenizer

CONTEXT_TOKENS = 8  # decoded tokens shown on each side of a first divergence


def divergence_context(a: Generation, b: Generation, position: int, tokenizer: Tokenizer) -> dict[str, Any]:
    """The text the two sides share before `position`, and each side's text from there on."""
    start = max(0, position - CONTEXT_TOKENS)
    return {
        "from_position": start,
        "before": tokenizer.decode(a.token_ids[start:position]),
        "a": tokenizer.decode(a.token_ids[position : position + CONTEXT_TOKENS]),
        "b": tokenizer.decode(b.token_ids[position : position + CONTEXT_TOKENS]),
    }


def compared(comps: list[dict[str, Any]], settings: dict[str, Any], unit: str = "prompt") -> dict[str, Any]:
    """What a verdict is over: the positions compared (every one holds a token id, a logprob and the
    requested top-k on both sides: answers.py refused any answer that does not), and whether the
    alternatives were compared by id or, where a server names them by text, by their logprobs only."""
    return {
        "answers": len(comps),  # pairs of answers compared: prompts (parity, golden check) or repeats
        "unit": unit,
        "positions": sum(c["positions"] for c in comps),
        "top_k": settings["top_logprobs"],
        "alternatives": "logprobs" if any(c["alternatives_by_text"] for c in comps) else "ids and logprobs",
        # answers that stopped at a stop token before max_new_tokens (answers.py lets them through,
        # with their stop reason): compared as they are, and said, so that few positions never hide
        "stopped": sum(min(c["len_a"], c["len_b"]) < settings["max_new_tokens"] for c in comps),
        "asked": settings["max_new_tokens"],
    }


def comparison_summary(
    *,
    verb: str,
    title: str,
    a: dict[str, Any],
    b: dict[str, Any],
    settings: dict[str, Any],
    gens_a: list[Generation],
    gens_b: list[Generation],
    tokenizer: Tokenizer | None = None,
) -> dict[str, Any]:
    comps = []
    for x, y in zip(gens_a, gens_b, strict=True):
        comp = compare(x, y).to_json()
        if tokenizer is not None and comp["first_divergence"] is not None:
            comp["context"] = divergence_context(x, y, comp["first_divergence"], tokenizer)
        comps.append(comp)
    inconsistent = [
        {"side": side, "prompt_id": gen.prompt_id, **found}
        for side, gens in (("A", gens_a), ("B", gens_b))
        for gen in gens
        for found in not_argmax(gen)
    ]
    return {
        "verb": verb,
        "title": title,
        "a": a,
        "b": b,
        "settings": settings,
        "compared_values": compared(comps, settings),
        "prompts": len(comps),
        "equal": sum(c["equal"] for c in comps),
        "differ": sum(not c["equal"] for c in comps),
        "tokens_differ": sum(not c["tokens_equal"] for c in comps),
        "comparisons": comps,
        # positions where a side's chosen token is not its reported argmax (answers.not_argmax): compared as
        # they are, and reported, since they show a difference in that engine's numerics
        "not_argmax": inconsistent,
    }
