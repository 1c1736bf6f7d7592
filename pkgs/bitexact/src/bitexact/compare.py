"""Bitwise comparison of two generations of the same prompt: where they first part, and how close the
top-1 and top-2 candidates were there (divergences cluster where that margin is tiny)."""

from __future__ import annotations

import math
import struct
from dataclasses import asdict, dataclass
from typing import Any

from bitexact.generation import Generation, TopEntry


def same_bits(a: float, b: float) -> bool:
    """Equal as IEEE-754 doubles, bit for bit (so -0.0 != 0.0 and NaN == NaN of the same payload)."""
    return struct.pack("<d", a) == struct.pack("<d", b)


def _is_float32(x: float) -> bool:
    try:
        return struct.unpack("<f", struct.pack("<f", x))[0] == x
    except OverflowError:
        return False


def _ordered(bits: int, width: int) -> int:
    """An IEEE-754 bit pattern (as an unsigned int) mapped to an integer line on which neighbouring
    floats are neighbouring integers (negative floats mirrored below zero)."""
    sign = 1 << (width - 1)
    return -(bits & (sign - 1)) if bits & sign else bits


def ulp_distance(a: float, b: float) -> tuple[int, str] | None:
    """How many representable floats apart a and b are, counted in float32 when both are float32
    values (engines compute logprobs in float32 and send them as doubles), else in float64.
    None for NaN or infinity."""
    if not (math.isfinite(a) and math.isfinite(b)):
        return None
    if _is_float32(a) and _is_float32(b):
        fa, fb = (struct.unpack("<I", struct.pack("<f", x))[0] for x in (a, b))
        return abs(_ordered(fa, 32) - _ordered(fb, 32)), "float32"
    da, db = (struct.unpack("<Q", struct.pack("<d", x))[0] for x in (a, b))
    return abs(_ordered(da, 64) - _ordered(db, 64)), "float64"


def _same_top(a: list[TopEntry], b: list[TopEntry]) -> bool:
    """Same alternatives with the same logprobs. Where either side names alternatives by text (SGLang's
    OpenAI-compatible API), only the logprob values can be compared."""
    if len(a) != len(b):
        return False
    if any(isinstance(t, str) for t, _ in a + b):
        values_a, values_b = sorted(x for _, x in a), sorted(x for _, x in b)
        return all(same_bits(la, lb) for la, lb in zip(values_a, values_b, strict=True))
    return all(ta == tb and same_bits(la, lb) for (ta, la), (tb, lb) in zip(a, b, strict=True))


def margin(top: list[TopEntry]) -> float | None:
    """Top-1 minus top-2 logprob at one position (None when fewer than two alternatives are known)."""
    values = sorted((lp for _, lp in top), reverse=True)
    return values[0] - values[1] if len(values) >= 2 else None


def _first(flags: list[bool]) -> int | None:
    return next((i for i, differs in enumerate(flags) if differs), None)


@dataclass
class PromptComparison:
    prompt_id: str
    equal: bool
    tokens_equal: bool
    logprobs_equal: bool
    top_equal: bool
    first_divergence: int | None  # first position where ids, logprobs or top-k differ
    first_token_divergence: int | None
    first_logprob_divergence: int | None
    len_a: int
    len_b: int
    positions: int = 0  # positions compared: each with token id, logprob and top-k on both sides
    alternatives_by_text: bool = False  # some alternatives named by text: their logprobs compared only
    token_a: int | None = None
    token_b: int | None = None
    logprob_a: float | None = None
    logprob_b: float | None = None
    margin_a: float | None = None
    margin_b: float | None = None
    token_margin_a: float | None = (
        None  # the margin where the token ids part (a greedy flip needs a near tie)
    )
    token_margin_b: float | None = None
    differs_in: str | None = None  # what differs at the first divergence: "token id", "logprob", "top-k"
    logprob_delta: float | None = None  # |logprob A - logprob B| at the first divergence
    logprob_ulps: int | None = None  # the same distance in units in the last place
    ulp_format: str | None = None  # "float32" or "float64": the format the ULPs count in

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def compare(a: Generation, b: Generation) -> PromptComparison:
    n = min(len(a.token_ids), len(b.token_ids))
    length_differs = len(a.token_ids) != len(b.token_ids)
    tok = [a.token_ids[i] != b.token_ids[i] for i in range(n)]
    nl = min(len(a.logprobs), len(b.logprobs))
    lp = [not same_bits(a.logprobs[i], b.logprobs[i]) for i in range(nl)]
    compare_top = bool(a.top_logprobs) and bool(b.top_logprobs)
    nt = min(len(a.top_logprobs), len(b.top_logprobs)) if compare_top else 0
    top = [not _same_top(a.top_logprobs[i], b.top_logprobs[i]) for i in range(nt)]

    first_tok = _first(tok)
    if first_tok is None and length_differs:
        first_tok = n
    first_lp = _first(lp)
    if first_lp is None and len(a.logprobs) != len(b.logprobs):
        first_lp = nl
    first_top = _first(top)
    if first_top is None and compare_top and len(a.top_logprobs) != len(b.top_logprobs):
        first_top = nt
    candidates = [p for p in (first_tok, first_lp, first_top) if p is not None]
    first = min(candidates) if candidates else None

    result = PromptComparison(
        prompt_id=a.prompt_id,
        equal=first is None,
        tokens_equal=first_tok is None,
        logprobs_equal=first_lp is None,
        top_equal=first_top is None,
        first_divergence=first,
        first_token_divergence=first_tok,
        first_logprob_divergence=first_lp,
        len_a=len(a.token_ids),
        len_b=len(b.token_ids),
        positions=n,
        alternatives_by_text=any(
            isinstance(t, str) for row in a.top_logprobs + b.top_logprobs for t, _ in row
        ),
    )
    if first is not None:
        if first < len(a.token_ids):
            result.token_a = a.token_ids[first]
            result.logprob_a = a.logprobs[first] if first < len(a.logprobs) else None
            result.margin_a = margin(a.top_logprobs[first]) if first < len(a.top_logprobs) else None
        if first < len(b.token_ids):
            result.token_b = b.token_ids[first]
            result.logprob_b = b.logprobs[first] if first < len(b.logprobs) else None
            result.margin_b = margin(b.top_logprobs[first]) if first < len(b.top_logprobs) else None
    if first is not None:
        what = [
            name
            for name, pos in (("token id", first_tok), ("logprob", first_lp), ("top-k", first_top))
            if pos == first
        ]
        result.differs_in = ", ".join(what)
    if result.logprob_a is not None and result.logprob_b is not None:
        result.logprob_delta = abs(result.logprob_a - result.logprob_b)
        ulps = ulp_distance(result.logprob_a, result.logprob_b)
        if ulps is not None:
            result.logprob_ulps, result.ulp_format = ulps
    if first_tok is not None:
        if first_tok < len(a.top_logprobs):
            result.token_margin_a = margin(a.top_logprobs[first_tok])
        if first_tok < len(b.top_logprobs):
            result.token_margin_b = margin(b.top_logprobs[first_tok])
    return result
