"""SGLang's generate output (`/generate` and `Engine.generate`) -> Generation.

Shapes from sglang 0.5.20 `srt/managers/tokenizer_manager.py`: the result is `{"text", "output_ids",
"meta_info"}`; `meta_info.output_token_logprobs` is a list of `(logprob, token_id, text_or_None)`,
`output_top_logprobs` a list (per position) of such lists or None; speculative decoding adds
`spec_verify_ct`, `spec_accept_length`, `spec_num_correct_drafts`, `spec_num_proposed_drafts` (older
releases: `spec_accept_length` and `spec_verify_ct` only) and only when `spec_verify_ct > 0`;
`cached_tokens` (the prompt tokens the radix cache supplied, `Req.cached_tokens`) is always there.
"""

from __future__ import annotations

from typing import Any

from bitexact.engines.base import Settings
from bitexact.engines.values import count, generated_count, measure, pair, reason, token_id
from bitexact.errors import EngineError
from bitexact.generation import Generation, SpecStats, TopEntry
from bitexact.prompts import Prompt

SPEC_KEYS = ("spec_verify_ct", "spec_accept_length", "spec_num_correct_drafts", "spec_num_proposed_drafts")


def request_fields(prompt: Prompt, settings: Settings) -> dict[str, Any]:
    """One request's fields: explicit greedy sampling (servers may take defaults from the model's
    generation config otherwise), fixed length, output logprobs only (`logprob_start_len=-1`)."""
    body: dict[str, Any] = (
        {"input_ids": list(prompt.input_ids)} if prompt.input_ids is not None else {"text": prompt.text}
    )
    body.update(
        sampling_params={
            "temperature": 0.0,
            "top_p": 1.0,
            "top_k": -1,
            "min_p": 0.0,
            "max_new_tokens": settings.max_new_tokens,
            "ignore_eos": True,
        },
        return_logprob=True,
        top_logprobs_num=settings.top_logprobs,
        logprob_start_len=-1,
    )
    return body


def spec_stats(meta: dict[str, Any], where: str) -> SpecStats | None:
    """The speculation statistics of `meta_info`, each read strictly (engines/values.py)."""
    if not any(key in meta for key in SPEC_KEYS):
        return None

    def field(*keys: str) -> int | None:
        key = next((k for k in keys if k in meta), keys[0])
        return count(meta.get(key), f"meta_info.{key}", where)

    return SpecStats(
        verify_ct=field("spec_verify_ct") or 0,
        accept_length=measure(meta.get("spec_accept_length"), "meta_info.spec_accept_length", where),
        correct_drafts=field("spec_num_correct_drafts", "spec_accepted_drafts"),
        proposed_drafts=field("spec_num_proposed_drafts", "spec_proposed_drafts"),
        source="meta_info",
    )


def _top_row(row: Any, position: int, where: str) -> list[TopEntry]:
    if row is None:
        return []
    if not isinstance(row, list):
        raise EngineError(f"{where}: output_top_logprobs[{position}] is {str(row)[:60]!r}, not a list")
    entries = [pair(entry, f"output_top_logprobs[{position}] entry", where) for entry in row]
    return [(tok, lp) for lp, tok in entries]


def parse_generate_output(prompt: Prompt, out: Any, settings: Settings, where: str) -> Generation:
    if not isinstance(out, dict) or not isinstance(out.get("meta_info"), dict):
        raise EngineError(f"{where}: answer for prompt {prompt.id!r} has no meta_info: {str(out)[:300]}")
    meta = out["meta_info"]
    token_lp = meta.get("output_token_logprobs")
    if token_lp is None:
        raise EngineError(
            f"{where}: no output_token_logprobs for {prompt.id!r} (was return_logprob ignored?)"
        )
    if not isinstance(token_lp, list):
        raise EngineError(f"{where}: output_token_logprobs is not a list of (logprob, token_id, text)")
    entries = [pair(entry, f"output_token_logprobs[{i}]", where) for i, entry in enumerate(token_lp)]
    logprobs, lp_ids = [lp for lp, _ in entries], [tok for _, tok in entries]
    listed = out.get("output_ids", lp_ids)
    if not isinstance(listed, list):
        raise EngineError(f"{where}: output_ids is {str(listed)[:60]!r}, not a list")
    token_ids = [token_id(t, f"output_ids[{i}]", where) for i, t in enumerate(listed)]
    if token_ids != lp_ids:
        raise EngineError(
            f"{where}: output_ids and the ids in output_token_logprobs disagree for {prompt.id!r}"
        )
    rows = meta.get("output_top_logprobs") or []
    if not isinstance(rows, list):
        raise EngineError(f"{where}: output_top_logprobs is {str(rows)[:60]!r}, not a list")
    top = [_top_row(row, i, where) for i, row in enumerate(rows)]
    finish = meta.get("finish_reason")
    counted = f"{where} ({prompt.id!r})"
    generated_count(meta.get("completion_tokens"), len(token_ids), "meta_info.completion_tokens", counted)
    if isinstance(finish, dict) and finish.get("type") == "length":  # FINISH_LENGTH: the cap it reached
        generated_count(finish.get("length"), len(token_ids), "meta_info.finish_reason.length", counted)
    return Generation(
        prompt_id=prompt.id,
        token_ids=token_ids,
        logprobs=logprobs,
        top_logprobs=top,
        spec=spec_stats(meta, counted),
        latency_s=measure(meta.get("e2e_latency"), "meta_info.e2e_latency", counted),
        meta={
            "finish_reason": reason(finish.get("type") if isinstance(finish, dict) else finish),
            "prompt_tokens": count(meta.get("prompt_tokens"), "meta_info.prompt_tokens", counted),
            "completion_tokens": count(meta.get("completion_tokens"), "meta_info.completion_tokens", counted),
            # prompt tokens the radix cache supplied
            "cached_tokens": count(meta.get("cached_tokens"), "meta_info.cached_tokens", counted),
        },
    )
