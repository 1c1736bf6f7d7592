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
        """A stored generation (results file, golden), read strictly: ids are whole numbers, logprobs
        numbers, alternatives (id or text, number) pairs. ValueError names the first field that is not."""
        spec = data.get("spec")
        if spec is not None and not isinstance(spec, dict):
            raise ValueError("'spec' is not an object")
        meta = data.get("meta", {})
        if not isinstance(meta, dict):
            raise ValueError("'meta' is not an object")
        return cls(
            prompt_id=str(data["prompt_id"]),
            token_ids=[_whole(t, "token_ids") for t in _list(data["token_ids"], "token_ids")],
            logprobs=[_number(x, "logprobs") for x in _list(data["logprobs"], "logprobs")],
            top_logprobs=[
                [_entry(e) for e in _list(row, "top_logprobs row")]
                for row in _list(data.get("top_logprobs", []), "top_logprobs")
            ],
            spec=_spec(spec) if spec else None,
            latency_s=_measure(data.get("latency_s"), "latency_s"),
            meta=_meta(meta),
        )


# The counts a stored answer's meta may hold (the engines' readers wrote them as counts or null).
META_COUNTS = ("prompt_tokens", "completion_tokens", "cached_tokens")


def _count(value: Any, what: str) -> int | None:
    """A stored count: a whole number >= 0, or null (as engines/values.py `count` reads an answer's)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"'{what}' holds {str(value)[:40]!r}, not a count (a whole number >= 0)")
    return value


def _measure(value: Any, what: str) -> float | None:
    """A stored measure: a finite number >= 0, or null (as engines/values.py `measure` reads one)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise ValueError(f"'{what}' holds {str(value)[:40]!r}, not a finite number >= 0")
    return float(value)


def _spec(data: dict[str, Any]) -> SpecStats:
    unknown = sorted(
        set(data) - {"verify_ct", "accept_length", "correct_drafts", "proposed_drafts", "source"}
    )
    if unknown:
        raise ValueError(f"'spec' holds fields no speculation record has: {unknown}")
    verify = _count(data.get("verify_ct"), "spec.verify_ct")
    if verify is None:
        raise ValueError("'spec.verify_ct' is missing")
    source = data.get("source", "")
    if not isinstance(source, str):
        raise ValueError("'spec.source' is not text")
    return SpecStats(
        verify_ct=verify,
        accept_length=_measure(data.get("accept_length"), "spec.accept_length"),
        correct_drafts=_count(data.get("correct_drafts"), "spec.correct_drafts"),
        proposed_drafts=_count(data.get("proposed_drafts"), "spec.proposed_drafts"),
        source=source,
    )


def _meta(meta: dict[str, Any]) -> dict[str, Any]:
    for key in META_COUNTS:
        _count(meta.get(key), f"meta.{key}")
    return dict(meta)


def _list(value: Any, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise ValueError(f"'{what}' is not a list")
    return value


def _whole(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"'{what}' holds {value!r}, not a whole number")
    return value


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"'{what}' holds {value!r}, not a number")
    return float(value)


def _entry(entry: Any) -> TopEntry:
    if not isinstance(entry, list | tuple) or len(entry) != 2:
        raise ValueError(f"a top_logprobs entry is {entry!r}, not [token, logprob]")
    key = entry[0] if isinstance(entry[0], str) else _whole(entry[0], "top_logprobs token")
    return key, _number(entry[1], "top_logprobs logprob")
