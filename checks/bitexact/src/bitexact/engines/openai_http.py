"""OpenAI-compatible `POST /v1/completions` (vLLM, SGLang) with logprobs and token ids.

Shapes: SGLang 0.5.20 `srt/entrypoints/openai/protocol.py` (CompletionRequest: `return_token_ids`,
`top_k`, `ignore_eos`, `return_spec_tokens_details`; CompletionResponseChoice: `token_ids`, `logprobs`
{`tokens`, `token_logprobs`, `top_logprobs` keyed by token text}; `sglext.spec_tokens_details`) and
`serving_completions.py`; vLLM's `vllm/entrypoints/openai/protocol.py` (`return_token_ids` gives
`choices[i].token_ids`; `return_tokens_as_token_ids` writes tokens and top-logprob keys as
`token_id:N`). Fields one server does not know are ignored by the other.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from bitexact.engines.base import Settings, Timing
from bitexact.engines.concurrent import in_flight
from bitexact.engines.http import HttpClient
from bitexact.engines.openai_identity import openai_identity
from bitexact.engines.spec import EngineSpec
from bitexact.errors import EngineError
from bitexact.generation import Generation, SpecStats, TopEntry
from bitexact.prompts import Prompt

TOKEN_ID_PREFIX = "token_id:"


def _token_key(key: str) -> int | str:
    if key.startswith(TOKEN_ID_PREFIX):
        try:
            return int(key[len(TOKEN_ID_PREFIX) :])
        except ValueError:
            return key
    return key


def completion_request(
    model: str, prompt: Prompt, settings: Settings, stream: bool = False
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model,
        "prompt": list(prompt.input_ids) if prompt.input_ids is not None else prompt.text,
        "max_tokens": settings.max_new_tokens,
        "temperature": 0.0,
        "top_p": 1.0,
        "top_k": -1,
        "ignore_eos": True,
        "return_token_ids": True,
        "return_tokens_as_token_ids": True,
        "return_spec_tokens_details": True,
        "stream": stream,
    }
    if settings.top_logprobs > 0:
        body["logprobs"] = settings.top_logprobs
    if stream:
        body["stream_options"] = {"include_usage": True}
    return body


def _spec(response: dict[str, Any]) -> SpecStats | None:
    details = (response.get("sglext") or {}).get("spec_tokens_details")
    if isinstance(details, list):
        details = details[0] if details else None
    if not isinstance(details, dict):
        return None
    return SpecStats(
        verify_ct=int(details.get("spec_verify_ct") or 0),
        accept_length=details.get("spec_accept_length"),
        correct_drafts=details.get("spec_num_correct_drafts"),
        proposed_drafts=details.get("spec_num_proposed_drafts"),
        source="sglext.spec_tokens_details",
    )


def parse_completion(prompt: Prompt, response: Any, where: str) -> Generation:
    try:
        choice = response["choices"][0]
        lp = choice["logprobs"]
        logprobs = [float(x) for x in lp["token_logprobs"]]
    except (KeyError, IndexError, TypeError, ValueError):
        raise EngineError(
            f"{where}: answer for {prompt.id!r} has no choices[0].logprobs.token_logprobs"
        ) from None
    token_ids = choice.get("token_ids")
    if token_ids is None:
        keys = [_token_key(t) for t in lp.get("tokens", [])]
        if not all(isinstance(k, int) for k in keys):
            raise EngineError(
                f"{where}: no token ids in the answer: the server supports neither return_token_ids "
                "(SGLang, vLLM >= 0.10.2) nor return_tokens_as_token_ids (vLLM)"
            )
        token_ids = keys
    token_ids = [int(t) for t in token_ids]
    if len(token_ids) != len(logprobs):
        raise EngineError(
            f"{where}: {len(token_ids)} token ids but {len(logprobs)} logprobs for {prompt.id!r}"
        )
    top: list[list[TopEntry]] = []
    for row in lp.get("top_logprobs") or []:
        entries = [(_token_key(k), float(v)) for k, v in (row or {}).items()]
        top.append(sorted(entries, key=lambda e: (-e[1], str(e[0]))))
    return Generation(
        prompt_id=prompt.id,
        token_ids=token_ids,
        logprobs=logprobs,
        top_logprobs=top,
        spec=_spec(response),
        meta={"finish_reason": choice.get("finish_reason"), "usage": response.get("usage")},
    )


class OpenAIHttpEngine:
    def __init__(self, spec: EngineSpec, inflight: int = 1) -> None:
        self.label = spec.raw
        self.group_size = inflight
        self.model = spec.params["model"]
        self.client = HttpClient(
            spec.target, timeout=spec.timeout_s(), retries=spec.int_param("retries", 3), inflight=inflight
        )

    def identity(self) -> dict[str, Any]:
        return openai_identity(self.client, self.model)

    def _one(self, prompt: Prompt, settings: Settings) -> Generation:
        response = self.client.post_json("/completions", completion_request(self.model, prompt, settings))
        return parse_completion(prompt, response, f"{self.client.base}/completions")

    def generate(self, prompts: list[Prompt], settings: Settings) -> Iterator[Generation]:
        return in_flight(prompts, lambda p: self._one(p, settings))

    def timed(self, prompt: Prompt, max_new_tokens: int) -> Timing:
        body = completion_request(self.model, prompt, Settings(max_new_tokens, top_logprobs=0), stream=True)
        start = time.perf_counter()
        first: float | None = None
        usage: dict[str, Any] = {}
        for chunk in self.client.post_stream("/completions", body):
            now = time.perf_counter()
            choices = chunk.get("choices") or []
            if first is None and choices and (choices[0].get("text") or choices[0].get("token_ids")):
                first = now
            usage = chunk.get("usage") or usage
        end = time.perf_counter()
        if first is None:
            raise EngineError(f"{self.client.base}/completions: the stream carried no tokens")
        return Timing(
            prompt_tokens=int(usage.get("prompt_tokens") or len(prompt.input_ids or ())),
            new_tokens=int(usage.get("completion_tokens") or max_new_tokens),
            ttft_s=first - start,
            decode_s=end - first,
        )

    def close(self) -> None:
        pass
