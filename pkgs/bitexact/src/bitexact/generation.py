"""What an engine returns for one prompt, in one engine-independent shape."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

# One top-k entry: (token id, or the token's text where the API keys alternatives by text; logprob).
TopEntry = tuple[int | str, float]


@dataclass
class SpecStats:
    """Evidence that speculative decoding ran for a request (None fields: not reported)."""

    verify_ct: int
    accept_length: float | None = None
    correct_drafts: int | None = None
    proposed_drafts: int | None = None
    source: str = ""

    @property
    def ran(self) -> bool:
        # llama.cpp reports drafted tokens but no verify count; its drafts are always verified
        return self.verify_ct > 0 or (self.proposed_drafts or 0) > 0


@dataclass
class Generation:
    prompt_id: str
    token_ids: list[int]
    logprobs: list[float]
    top_logprobs: list[list[TopEntry]] = field(default_factory=list)
    spec: SpecStats | None = None
    latency_s: float | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["top_logprobs"] = [[[tok, lp] for tok, lp in row] for row in self.top_logprobs]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Generation:
        spec = data.get("spec")
        return cls(
            prompt_id=str(data["prompt_id"]),
            token_ids=[int(t) for t in data["token_ids"]],
            logprobs=[float(x) for x in data["logprobs"]],
            top_logprobs=[[(tok, float(lp)) for tok, lp in row] for row in data.get("top_logprobs", [])],
            spec=SpecStats(**spec) if spec else None,
            latency_s=data.get("latency_s"),
            meta=dict(data.get("meta", {})),
        )


def non_finite(gen: Generation) -> str | None:
    """Where `gen` holds a logprob that is not a finite number (NaN or an infinity), in words; None when
    every value is finite. Such a value cannot be compared bitwise with meaning, nor written as JSON."""
    for position, value in enumerate(gen.logprobs):
        if not math.isfinite(value):
            token = gen.token_ids[position] if position < len(gen.token_ids) else "?"
            return f"position {position}: the logprob of token {token} is {value!r}"
    for position, row in enumerate(gen.top_logprobs):
        for key, value in row:
            if not math.isfinite(value):
                return f"position {position}: the top-k logprob of alternative {key!r} is {value!r}"
    return None
