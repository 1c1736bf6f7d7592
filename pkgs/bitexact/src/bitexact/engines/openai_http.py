"""OpenAI-compatible `POST /v1/completions` (vLLM, SGLang, llama.cpp's server, ...) with logprobs.

The request asks every server for what it can give (fields one server does not know, the others
ignore): explicit greedy sampling and a fixed length; SGLang 0.5.20 `srt/entrypoints/openai/protocol.py`
CompletionRequest (`top_k`, `ignore_eos`, `return_token_ids`, `return_spec_tokens_details`); vLLM
`vllm/entrypoints/openai/completion/protocol.py` (`return_token_ids`, `return_tokens_as_token_ids`);
llama.cpp `tools/server/server-task.cpp` params_from_json_cmpl (`logprobs` sets n_probs, `ignore_eos`).
The answers come in several logprob dialects (openai_logprobs) and prove speculation in several ways
(openai_spec).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from bitexact.engines.base import Settings, Timing
from bitexact.engines.concurrent import in_flight
from bitexact.engines.http import HttpClient
from bitexact.engines.openai_identity import openai_identity
from bitexact.engines.openai_logprobs import Vocab, no_vocab, parse_logprobs
from bitexact.engines.openai_spec import Counters, spec_from_answer, spec_from_counters, vllm_counters
from bitexact.engines.spec import EngineSpec
from bitexact.engines.token_text import LazyVocabulary
from bitexact.engines.transport import TransportFailure, exchange
from bitexact.engines.values import count
from bitexact.errors import EngineError
from bitexact.generation import Generation
from bitexact.prompts import Prompt

METRICS_SETTLE_S = (0.05, 0.2, 0.5)


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


def parse_completion(prompt: Prompt, response: Any, where: str, vocab: Vocab = no_vocab) -> Generation:
    """One answer in any dialect (openai_logprobs), with the speculation proof it carries."""
    generation = parse_logprobs(prompt, response, where, vocab)
    generation.spec = spec_from_answer(response, f"{where} ({prompt.id!r})")
    return generation


class OpenAIHttpEngine:
    def __init__(self, spec: EngineSpec, inflight: int = 1, tokenizer: str | None = None) -> None:
        self.label = spec.raw
        self.group_size = inflight
        self.model = spec.params["model"]
        self.client = HttpClient(
            spec.target, timeout=spec.timeout_s(), retries=spec.int_param("retries", 3), inflight=inflight
        )
        self.vocab = LazyVocabulary(tokenizer)
        self.metrics: bool | None = None  # does /metrics carry vLLM's speculation counters? (asked once)

    def identity(self) -> dict[str, Any]:
        return openai_identity(self.client, self.model)

    def _server_root(self) -> str:
        """`/props` and `/metrics` live beside `/v1`, not under it."""
        base = self.client.base
        return base[: -len("/v1")] if base.endswith("/v1") else base

    def _counters(self) -> Counters | None:
        """vLLM's speculation counters, or None (no /metrics, or no speculation configured)."""
        try:
            answer = exchange(self._server_root() + "/metrics", "GET", None, {}, 30)
        except TransportFailure:
            return None
        if answer.status != 200:
            return None
        return vllm_counters(answer.body.decode("utf-8", errors="replace"))

    def _counters_after(self, before: Counters) -> Counters | None:
        """The counters once this request's steps are in: vLLM may record a step's statistics just
        after the answer has gone out, so a read that shows no new draft is repeated a few times."""
        after = self._counters()
        for wait in METRICS_SETTLE_S:
            if after is None or after.drafts > before.drafts:
                break
            time.sleep(wait)
            after = self._counters()
        return after

    def _one(self, prompt: Prompt, settings: Settings) -> Generation:
        where = f"{self.client.base}/completions"
        # vLLM proves speculation only through server-wide counters: read them around each request, and
        # only one request at a time, or one request's drafts would be credited to another
        use_metrics = self.group_size == 1 and self.metrics is not False
        before = self._counters() if use_metrics else None
        if use_metrics and self.metrics is None:
            self.metrics = before is not None
        response = self.client.post_json("/completions", completion_request(self.model, prompt, settings))
        generation = parse_completion(prompt, response, where, self.vocab.get)
        if generation.spec is None and before is not None:
            after = self._counters_after(before)
            if after is not None:
                generation.spec = spec_from_counters(before, after)
        return generation

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
            counts = chunk.get("usage")
            if counts is not None and not isinstance(counts, dict):
                raise EngineError(
                    f"{self.client.base}/completions: a streamed usage is {str(counts)[:60]!r}, not an "
                    "object of token counts"
                )
            usage = counts or usage
        end = time.perf_counter()
        if first is None:
            raise EngineError(f"{self.client.base}/completions: the stream carried no tokens")
        where = f"{self.client.base}/completions (streamed usage)"
        sent = count(usage.get("prompt_tokens"), "usage.prompt_tokens", where)
        made = count(usage.get("completion_tokens"), "usage.completion_tokens", where)
        return Timing(
            prompt_tokens=sent or len(prompt.input_ids or ()),
            new_tokens=made or max_new_tokens,
            ttft_s=first - start,
            decode_s=end - first,
        )

    def close(self) -> None:
        pass
