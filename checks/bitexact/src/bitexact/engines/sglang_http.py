"""SGLang's native HTTP API: `POST /generate` with input_ids, `GET /server_info`.

Request and response shapes from sglang 0.5.20: `srt/managers/io_struct.py` (GenerateReqInput),
`srt/entrypoints/http_server.py` (`/generate`, streaming as `data: {...}` lines ending `data: [DONE]`,
`/server_info`, deprecated `/get_server_info`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from bitexact.engines.base import Settings, Timing
from bitexact.engines.concurrent import in_flight
from bitexact.engines.http import HttpClient, HttpStatusError
from bitexact.engines.sglang_shapes import parse_generate_output, request_fields
from bitexact.engines.spec import EngineSpec
from bitexact.errors import EngineError
from bitexact.generation import Generation
from bitexact.prompts import Prompt

IDENTITY_KEYS = (
    "version",
    "model_path",
    "served_model_name",
    "attention_backend",
    "speculative_algorithm",
    "speculative_draft_model_path",
    "speculative_num_draft_tokens",
    "enable_deterministic_inference",
    "max_running_requests",
    "chunked_prefill_size",
    "disable_radix_cache",
    "mamba_ssm_dtype",
    "kv_cache_dtype",
    "dtype",
    "launch_command",
)


class SGLangHttpEngine:
    def __init__(self, spec: EngineSpec, inflight: int = 1) -> None:
        self.label = spec.raw
        self.group_size = inflight
        self.client = HttpClient(
            spec.target,
            timeout=spec.float_param("timeout", 3600),
            retries=spec.int_param("retries", 3),
        )

    def identity(self) -> dict[str, Any]:
        try:
            info = self.client.get_json("/server_info", timeout=30)
        except HttpStatusError:  # older servers name it /get_server_info; a dead one is not retried twice
            info = self.client.get_json("/get_server_info", timeout=30)
        if not isinstance(info, dict):
            raise EngineError(f"{self.client.base}/server_info: expected a JSON object")
        return {
            "engine": "sglang",
            "url": self.client.base,
            **{k: info[k] for k in IDENTITY_KEYS if k in info},
        }

    def _one(self, prompt: Prompt, settings: Settings) -> Generation:
        out = self.client.post_json("/generate", request_fields(prompt, settings))
        return parse_generate_output(prompt, out, settings, f"{self.client.base}/generate")

    def generate(self, prompts: list[Prompt], settings: Settings) -> Iterator[Generation]:
        return in_flight(prompts, lambda p: self._one(p, settings))

    def timed(self, prompt: Prompt, max_new_tokens: int) -> Timing:
        body = request_fields(prompt, Settings(max_new_tokens=max_new_tokens, top_logprobs=0))
        body.update(return_logprob=False, stream=True)
        start = time.perf_counter()
        first: float | None = None
        last_meta: dict[str, Any] = {}
        for chunk in self.client.post_stream("/generate", body):
            now = time.perf_counter()
            if first is None and chunk.get("output_ids"):
                first = now
            last_meta = chunk.get("meta_info") or last_meta
        end = time.perf_counter()
        if first is None:
            raise EngineError(f"{self.client.base}/generate: the stream carried no tokens")
        return Timing(
            prompt_tokens=int(last_meta.get("prompt_tokens") or len(prompt.input_ids or ())),
            new_tokens=int(last_meta.get("completion_tokens") or 0),
            ttft_s=first - start,
            decode_s=end - first,
        )

    def close(self) -> None:
        pass
