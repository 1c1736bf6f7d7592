"""SGLang's native HTTP API: `POST /generate` with input_ids, `GET /server_info` and `/model_info`.

Request and response shapes from sglang 0.5.20: `srt/managers/io_struct.py` (GenerateReqInput),
`srt/entrypoints/http_server.py` (`/generate`, streaming as `data: {...}` lines ending `data: [DONE]`;
`server_info()`: the resolved server args, `launch_command`, the scheduler's init info
(`status`, `max_total_num_tokens`, `max_req_input_len`), `startup_time`, `internal_states` (per DP
rank; `env_vars` only under SGLANG_EXPOSE_OWN_ENV_VARS), `version`, `kv_events`; deprecated
`/get_server_info`; `model_info()`: `model_path`, `weight_version`, `load_format`, ...). No GPU name
or PCI id is reported there, so a golden's card cannot come from the server.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator
from typing import Any

from bitexact.engines.base import Settings, Timing
from bitexact.engines.concurrent import in_flight
from bitexact.engines.http import HttpClient, HttpStatusError
from bitexact.engines.sglang_shapes import parse_generate_output, request_fields
from bitexact.engines.spec import EngineSpec
from bitexact.engines.values import count
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
# Not server args (the scheduler's live state, bookkeeping), or args that never change results and
# change between launches of the same command: `random_seed` is drawn at random when not given
# (`arg_groups/serving_hook.py`; greedy decoding does not use it, and a given one is in
# `launch_command`), `host`/`port` are where it serves; secrets are not hashed.
NOT_KEYED = {
    "launch_command",
    "status",
    "max_total_num_tokens",
    "max_req_input_len",
    "startup_time",
    "internal_states",
    "version",
    "kv_events",
    "random_seed",
    "host",
    "port",
    "api_key",
    "admin_api_key",
    "ssl_keyfile_password",
}


def _sha256(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def server_identity(info: dict[str, Any], model: dict[str, Any]) -> dict[str, Any]:
    """What keys results: the version (a git build's carries its commit), the model and its weights'
    version, a digest of every server arg (NOT_KEYED aside) and of the server's own environment
    variables where it exposes them."""
    states = info.get("internal_states")
    env = (
        states[0].get("env_vars")
        if isinstance(states, list) and states and isinstance(states[0], dict)
        else None
    )
    return {
        "version": info.get("version"),
        "model_path": model.get("model_path", info.get("model_path")),
        "revision": info.get("revision"),
        "weight_version": model.get("weight_version", info.get("weight_version")),
        "server_args_sha256": _sha256({k: v for k, v in info.items() if k not in NOT_KEYED}),
        "env_vars_sha256": None if env is None else _sha256(env),
        # When this server started: with the identity, what tells one server from another behind any
        # name (engines/instance.py). A restart changes it and nothing else, so it keys no results.
        "started": info.get("startup_time"),
    }


class SGLangHttpEngine:
    def __init__(self, spec: EngineSpec, inflight: int = 1) -> None:
        self.label = spec.raw
        self.group_size = inflight
        self.client = HttpClient(
            spec.target, timeout=spec.timeout_s(), retries=spec.int_param("retries", 3), inflight=inflight
        )

    def _info(self, path: str, old: str, required: bool, client: HttpClient | None = None) -> dict[str, Any]:
        client = client or self.client
        try:
            info = client.get_json(path)
        except HttpStatusError:  # older servers name it /get_...; a dead one is not retried twice
            try:
                info = client.get_json(old)
            except HttpStatusError:
                if required:
                    raise
                return {}
        if not isinstance(info, dict):
            raise EngineError(f"{client.base}{path}: expected a JSON object")
        return info

    def _server(self, client: HttpClient, info: dict[str, Any]) -> dict[str, Any]:
        """The identity of the server at `client`, whose /server_info answer is `info`."""
        model = self._info("/model_info", "/get_model_info", required=False, client=client)
        return {
            "engine": "sglang",
            "url": client.base,
            **{k: info[k] for k in IDENTITY_KEYS if k in info},
            **server_identity(info, model),
        }

    def identity(self) -> dict[str, Any]:
        info = self._info("/server_info", "/get_server_info", required=True)
        if not info.get("router_manager"):
            return self._server(self.client, info)
        # SGLang's router (sglang_router 0.3.2) answers /get_server_info with its own counts
        # ({"router_manager": true, "routers_count", "workers_count"}) and lists its workers at /workers.
        # What computes the answers are the workers: each is asked directly; the first by URL keys the
        # results and all are listed, so a fleet of mixed builds shows in every report.
        try:
            listing = self.client.get_json("/workers")
        except HttpStatusError as error:
            raise EngineError(
                f"{self.client.base} is SGLang's router, but it does not list its workers at /workers "
                f"({error}): the build behind it cannot be named; check a worker directly"
            ) from None
        # Sorted: the router lists its workers in no fixed order, and the identity keys resumable results.
        urls = sorted(
            w["url"]
            for w in (listing.get("workers") if isinstance(listing, dict) else None) or []
            if isinstance(w, dict) and isinstance(w.get("url"), str)
        )
        if not urls:
            raise EngineError(f"{self.client.base} is SGLang's router with no workers listed at /workers")
        workers = []
        for url in urls:
            client = HttpClient(url, timeout=self.client.timeout, retries=1)
            worker = self._info("/server_info", "/get_server_info", required=True, client=client)
            if worker.get("router_manager"):
                raise EngineError(f"{url} is a router, not a server: a router behind a router")
            workers.append(self._server(client, worker))
        keyed = {k: v for k, v in workers[0].items() if k != "url"}
        return {
            **keyed,
            "url": self.client.base,
            "router_workers": [w["url"] for w in workers],
            "router_worker_builds": sorted({w.get("version") or "?" for w in workers}),
            "router_worker_server_args_sha256": [w.get("server_args_sha256") for w in workers],
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
            meta = chunk.get("meta_info")
            if meta is not None and not isinstance(meta, dict):
                raise EngineError(
                    f"{self.client.base}/generate: a streamed meta_info is {str(meta)[:60]!r}, not an object"
                )
            last_meta = meta or last_meta
        end = time.perf_counter()
        if first is None:
            raise EngineError(f"{self.client.base}/generate: the stream carried no tokens")
        where = f"{self.client.base}/generate (streamed)"
        sent = count(last_meta.get("prompt_tokens"), "meta_info.prompt_tokens", where)
        return Timing(
            prompt_tokens=sent or len(prompt.input_ids or ()),
            new_tokens=count(last_meta.get("completion_tokens"), "meta_info.completion_tokens", where) or 0,
            ttft_s=first - start,
            decode_s=end - first,
        )

    def close(self) -> None:
        pass
