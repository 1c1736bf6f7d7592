"""Proof that speculative decoding ran for a request, as each OpenAI-compatible server reports it.

- SGLang 0.5.20: `sglext.spec_tokens_details` with `return_spec_tokens_details`
  (`srt/entrypoints/openai/protocol.py` SpecTokensDetails: spec_verify_ct, spec_accept_length,
  spec_num_correct_drafts, spec_num_proposed_drafts; a list when n > 1).
- llama.cpp's server: `timings.draft_n` and `timings.draft_n_accepted`, present only when draft_n > 0
  (`tools/server/server-task.cpp` result_timings::to_json). draft_n counts drafted tokens that were put
  into the target's batch to be verified (`server-context.cpp`: `slot.n_draft_total += draft.size()`
  after the n_min check), so draft_n > 0 means verification ran.
- vLLM: no per-request field; its Prometheus counters `vllm:spec_decode_num_drafts`,
  `..._num_draft_tokens` and `..._num_accepted_tokens` (`vllm/v1/spec_decode/metrics.py`
  SpecDecodingProm, exposed with the `_total` suffix, registered only when speculation is configured).
  Read before and after one request at a time, their increase is that request's, provided bitexact is
  the server's only client.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bitexact.engines.values import count, measure
from bitexact.generation import SpecStats

VLLM_COUNTERS = {
    "vllm:spec_decode_num_drafts": "drafts",
    "vllm:spec_decode_num_draft_tokens": "draft_tokens",
    "vllm:spec_decode_num_accepted_tokens": "accepted",
}


def _sglext(response: dict[str, Any], where: str) -> SpecStats | None:
    sglext = response.get("sglext")
    details = sglext.get("spec_tokens_details") if isinstance(sglext, dict) else None
    if isinstance(details, list):
        details = details[0] if details else None
    if not isinstance(details, dict):
        return None
    at = "sglext.spec_tokens_details"
    return SpecStats(
        verify_ct=count(details.get("spec_verify_ct"), f"{at}.spec_verify_ct", where) or 0,
        accept_length=measure(details.get("spec_accept_length"), f"{at}.spec_accept_length", where),
        correct_drafts=count(details.get("spec_num_correct_drafts"), f"{at}.spec_num_correct_drafts", where),
        proposed_drafts=count(
            details.get("spec_num_proposed_drafts"), f"{at}.spec_num_proposed_drafts", where
        ),
        source=at,
    )


def _timings(response: dict[str, Any], where: str) -> SpecStats | None:
    timings = response.get("timings")
    if not isinstance(timings, dict) or "draft_n" not in timings:
        return None
    return SpecStats(
        verify_ct=0,  # not reported; drafted tokens are verified, so draft_n > 0 is the proof
        correct_drafts=count(timings.get("draft_n_accepted"), "timings.draft_n_accepted", where) or 0,
        proposed_drafts=count(timings.get("draft_n"), "timings.draft_n", where) or 0,
        source="timings.draft_n",
    )


def spec_from_answer(response: Any, where: str) -> SpecStats | None:
    """What the answer itself says about speculation (None: nothing; llama.cpp then drafted nothing or
    has no draft model, SGLang was not asked or did not speculate). Each count is read strictly
    (engines/values.py): a count that is none is an engine error naming it, never proof."""
    if not isinstance(response, dict):
        return None
    sglext, timings = _sglext(response, where), _timings(response, where)  # both read: neither unchecked
    return sglext or timings


@dataclass(frozen=True)
class Counters:
    drafts: float
    draft_tokens: float
    accepted: float


def vllm_counters(text: str) -> Counters | None:
    """The speculative-decoding counters summed over their label sets; None when the server has none
    (vLLM registers them only when speculation is configured)."""
    found: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name_part, _, value = line.rpartition(" ")
        name = name_part.split("{", 1)[0].strip().removesuffix("_total")
        key = VLLM_COUNTERS.get(name)
        if key is None:
            continue
        try:
            found[key] = found.get(key, 0.0) + float(value)
        except ValueError:
            continue
    if "drafts" not in found:
        return None
    return Counters(found["drafts"], found.get("draft_tokens", 0.0), found.get("accepted", 0.0))


def spec_from_counters(before: Counters, after: Counters) -> SpecStats:
    drafts = int(after.drafts - before.drafts)
    accepted = int(after.accepted - before.accepted)
    return SpecStats(
        verify_ct=drafts,
        accept_length=1 + accepted / drafts if drafts > 0 else None,  # vLLM's convention: + bonus token
        correct_drafts=accepted,
        proposed_drafts=int(after.draft_tokens - before.draft_tokens),
        source="/metrics vllm:spec_decode_* (increase over the request)",
    )
