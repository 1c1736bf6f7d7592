"""Local HTTP servers (127.0.0.1 only) that answer like SGLang and vLLM, backed by a real transformers
model, so the HTTP engines are tested end to end on a CPU. No CPU build of SGLang or vLLM exists, so the
servers themselves cannot run here; these answer in their shapes, each cited below.

Sources of the shapes:
- SGLang native `/generate`: sglang 0.5.20 wheel, `srt/entrypoints/http_server.py` (`generate_request`:
  one JSON object, or `data: {...}` lines ending `data: [DONE]` when streaming) and
  `srt/managers/tokenizer_manager.py` (the result `{"text", "output_ids", "meta_info"}`; meta_info keys
  `id`, `finish_reason` {"type", "length"}, `prompt_tokens`, `weight_version`, `num_retractions`,
  `completion_tokens`, `cached_tokens`, `reasoning_tokens`, `e2e_latency`; `output_token_logprobs` as
  `(logprob, token_id, text)` with text None unless `return_text_in_logprobs`; `output_top_logprobs` per
  position; `_calculate_spec_decoding_metrics` adds `spec_accept_rate`, `spec_accept_length`,
  `spec_num_correct_drafts`, `spec_num_proposed_drafts`, `spec_verify_ct` only when spec_verify_ct > 0).
  Request fields from `srt/managers/io_struct.py` (GenerateReqInput).
- SGLang `/server_info`: `http_server.py` `server_info()`: `server_args.resolved_dict()` (every server
  arg as resolved; `random_seed` drawn with `random.randint(0, 1 << 30)` when not given,
  `arg_groups/serving_hook.py`), `launch_command`, the scheduler's init info (`status`,
  `max_total_num_tokens`, `max_req_input_len`, `startup_time`; `managers/scheduler.py`
  `get_init_info`), `internal_states` (per DP rank: the resolved args again plus live state such as
  `last_gen_throughput` and `memory_usage`), `version`, `kv_events`. `/model_info`: `model_info()`
  (`model_path`, `served_model_name`, `tokenizer_path`, `weight_version`, `load_format`, ...).
- Failures a client meets (not SGLang's own shapes): a body cut short (the connection closes before
  Content-Length bytes: `http.client.IncompleteRead`), a connection closed without an answer, a
  proxy's or uvicorn's `500 Internal Server Error` in text/plain, an answer that never comes.
- SGLang `/v1/completions`: `srt/entrypoints/openai/serving_completions.py` (`_build_completion_response`),
  `protocol.py` (CompletionResponseChoice: `token_ids`, `prompt_token_ids`, `matched_stop`; LogProbs from
  `utils.to_openai_style_logprobs`: `text_offset` all -1, `top_logprobs` keyed by token text;
  `sglext.spec_tokens_details` when `return_spec_tokens_details`).
- vLLM `/v1/completions`: `vllm/entrypoints/openai/protocol.py` (CompletionResponseChoice: `token_ids`,
  `prompt_token_ids` with `return_token_ids`; CompletionLogProbs `tokens`/`top_logprobs` keys written as
  `token_id:N` with `return_tokens_as_token_ids`; `stop_reason`), `/v1/models` list,
  `GET /version` (`{"version": VLLM_VERSION}`, `vllm/entrypoints/openai/api_server.py`).
- The prefix cache: SGLang's `meta_info.cached_tokens` (every answer; `Req.cached_tokens`, the prompt
  tokens the radix cache matched, at most all but the last: `Req.adjust_max_prefix_ids`), its
  `/flush_cache` (GET or POST; 200 `Cache flushed.` text, 400 with the scheduler's message when it does
  not flush: `http_server.py` flush_cache, `scheduler_components/flush_wrapper.py`); vLLM's
  `usage.prompt_tokens_details = {"cached_tokens": N}` (only when N > 0, as with
  `--enable-prompt-tokens-details`: `serving_completion.py`) and `POST /reset_prefix_cache` (only under
  VLLM_SERVER_DEV_MODE=1; 200 with an empty body, success not checked: `serve/cache/api_router.py`).
"""

from __future__ import annotations

import json
import random
import struct
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

# fault(request number from 0, request body) -> None (answer normally) or one of FAULTS
FAULTS = ("truncate", "reset", "500", "hang")
Fault = Callable[[int, dict[str, Any]], str | None]
# prefix_cache: "off" (--disable-radix-cache: no hits, /server_info says so), "on" (a radix cache of every
# sequence served), "hybrid" (as SGLang 0.5.20's mamba radix cache keeps a hybrid model's recurrent
# state, `mem_cache/mamba_radix_cache.py`: a prefix is reused only up to a point that holds one, kept at
# the end of each sequence served and, where a match stopped short of one, at the last multiple of
# hybrid_unit inside the match), "never-hits" (on by its args, never matches); flush: "ok", "absent"
# (404: vLLM without dev mode, a proxy), "refuse" (SGLang: 400; vLLM: 200 and nothing flushed)
PREFIX_CACHES = ("off", "on", "hybrid", "never-hits")
HYBRID_CHUNK = 16  # SGLang: max(the model's mamba chunk size, page size), 64 for GDN at page size 1
# What the H200 run of 2026-12-02 measured (SGLang 0.5.20, hybrid GDN, extra_buffer): hits in 64-token
# units only, floor((L-1)/64)*64 of L prompt tokens (95 -> 64, 170 -> 128, 549 -> 512; 16, 32, 56 -> 0)
HYBRID_UNIT_MEASURED = 64
FLUSHES = ("ok", "absent", "refuse")
SGLANG_FLUSHED = (
    "Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting "
    "requests, the operation will not be performed.)\n"
)


def next_float32(value: float) -> float:
    """The float32 one step towards zero from `value` (a float32): a bit that moved."""
    bits = struct.unpack("<I", struct.pack("<f", value))[0]
    return float(struct.unpack("<f", struct.pack("<I", bits - 1))[0])


class Backend:
    """Greedy generation with transformers, one request at a time (the model is not thread-safe)."""

    def __init__(self, model_dir: Path) -> None:
        from transformers import AutoModelForCausalLM

        self.model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
        self.lock = threading.Lock()

    def run(
        self, ids: list[int], new: int, k: int
    ) -> tuple[list[int], list[float], list[list[tuple[int, float]]]]:
        import torch

        with self.lock, torch.no_grad():
            x = torch.tensor([ids])
            out = self.model.generate(
                input_ids=x,
                attention_mask=torch.ones_like(x),
                do_sample=False,
                max_new_tokens=new,
                eos_token_id=None,
                pad_token_id=0,
                output_logits=True,
                return_dict_in_generate=True,
            )
        logp = torch.stack(out.logits, 1)[0].float().log_softmax(-1)
        toks = out.sequences[0, len(ids) :].tolist()
        chosen = [logp[i, t].item() for i, t in enumerate(toks)]
        top: list[list[tuple[int, float]]] = []
        if k:
            values, indices = logp.topk(k, dim=-1)
            top = [
                list(zip(i.tolist(), v.tolist(), strict=True)) for i, v in zip(indices, values, strict=True)
            ]
        return toks, chosen, top


def _prefix_hashes(ids: list[int]) -> list[int]:
    """A hash of every prefix of `ids` (entry k: the first k ids), in one pass."""
    out = [0]
    for token in ids:
        out.append(hash((out[-1], token)))
    return out


def _text(token_id: int) -> str:
    return f"<{token_id}>"  # the tiny model has no tokenizer; a unique text per id, as a real one gives


class FakeServer:
    """flavor: 'sglang' (native + OpenAI-compatible) or 'vllm' (OpenAI-compatible only).
    spec: report speculative decoding stats. die_after: stop answering after that many generate requests.
    version, server_args: what /server_info reports (server_args update the defaults below).
    fault: per generate request, a failure to answer with instead (FAULTS). delay: seconds each
    generate answer takes (per request body, for requests in flight that finish in a known order).
    prefix_cache, flush: PREFIX_CACHES, FLUSHES. warm_drift: an answer that took tokens from the cache has
    the logprob at position 1 one float32 step off (a cache that moves bits). hybrid_unit: the tokens a
    "hybrid" cache matches in (HYBRID_CHUNK, or HYBRID_UNIT_MEASURED as on the H200)."""

    def __init__(
        self,
        backend: Backend,
        flavor: str = "sglang",
        spec: bool = False,
        port: int = 0,
        die_after: int | None = None,
        version: str | None = None,
        server_args: dict[str, Any] | None = None,
        fault: Fault | None = None,
        delay: Callable[[dict[str, Any]], float] | None = None,
        prefix_cache: str = "off",
        flush: str = "ok",
        warm_drift: bool = False,
        hybrid_unit: int = HYBRID_CHUNK,
    ) -> None:
        if prefix_cache not in PREFIX_CACHES or flush not in FLUSHES or hybrid_unit < 1:
            raise ValueError(f"prefix_cache one of {PREFIX_CACHES}, flush one of {FLUSHES}, hybrid_unit 1+")
        self.prefix_cache, self.flush, self.warm_drift = prefix_cache, flush, warm_drift
        self.hybrid_unit = hybrid_unit
        self.cache: list[list[int]] = []  # every sequence served since the last flush (prompt + output)
        self.states: set[tuple[int, int]] = set()  # hybrid: (length, prefix hash) where a state is kept
        self.flushes: list[int] = []  # the status of each flush request
        self.backend, self.flavor, self.spec, self.die_after = backend, flavor, spec, die_after
        # the releases whose shapes these are (vLLM's `return_token_ids` came in 0.10.2)
        self.version = version or ("0.5.20" if flavor == "sglang" else "0.10.2")
        self.fault, self.delay = fault, delay
        self.extra_args = dict(server_args or {})
        self.random_seed = random.randint(0, 1 << 30)  # as SGLang draws it when --random-seed is not given
        self.startup_time = time.time()
        self.requests: list[dict[str, Any]] = []
        self.served = 0
        self.attempts = 0  # generate requests received, failed ones included
        self.release = threading.Event()  # ends every "hang"
        self.count_lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, code: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _flush(self) -> bool:
                """The cache endpoint of this flavor, if the path names it: answered, True."""
                path = self.path.split("?", 1)[0]
                if path != ("/flush_cache" if server.flavor == "sglang" else "/reset_prefix_cache"):
                    return False
                if server.flush == "absent":
                    server.flushes.append(404)
                    self._send(404, {"detail": "Not Found"})
                    return True
                code, data = 200, b"" if server.flavor == "vllm" else SGLANG_FLUSHED.encode()
                if server.flush == "ok":
                    with server.count_lock:
                        server.cache.clear()
                        server.states.clear()
                elif server.flavor == "sglang":  # refused; vLLM answers 200 whether or not it reset
                    code, data = 400, b"Timed out waiting for idle state."
                server.flushes.append(code)
                self.send_response(code)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return True

            def do_GET(self) -> None:
                # SGLang 0.5.20's http_server.py: /health (the process is up) and /health_generate (a
                # one-token generation ran); what the router and our launchers wait on.
                if server.flavor == "sglang" and self._flush():
                    return
                if self.path in ("/health", "/health_generate"):
                    self._send(200, {})
                elif self.path in ("/server_info", "/get_server_info") and server.flavor == "sglang":
                    self._send(200, server.server_info())
                elif self.path in ("/model_info", "/get_model_info") and server.flavor == "sglang":
                    self._send(200, server.model_info())
                elif self.path == "/version" and server.flavor == "vllm":
                    self._send(200, {"version": server.version})
                elif self.path == "/v1/models":
                    self._send(
                        200,
                        {
                            "object": "list",
                            "data": [
                                {
                                    "id": "tiny",
                                    "object": "model",
                                    "created": 0,
                                    "owned_by": server.flavor,
                                    "root": "tiny",
                                    "max_model_len": 2048,
                                }
                            ],
                        },
                    )
                else:
                    self._send(404, {"detail": "Not Found"})

            def do_POST(self) -> None:
                if self._flush():
                    self.rfile.read(int(self.headers.get("Content-Length") or 0))
                    return
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if server.die_after is not None and server.served >= server.die_after:
                    self.close_connection = True  # the server "crashed": drop the request unanswered
                    threading.Thread(target=server.stop, daemon=True).start()
                    return
                with server.count_lock:
                    number = server.attempts
                    server.attempts += 1
                kind = server.fault(number, body) if server.fault else None
                if kind is not None:
                    return self._fail(kind)
                if server.delay is not None:
                    time.sleep(server.delay(body))
                with server.count_lock:
                    server.requests.append({"path": self.path, "body": body})
                    server.served += 1
                if self.path == "/generate" and server.flavor == "sglang":
                    answer = server.generate(body)
                    if body.get("stream"):
                        return self._stream(answer)
                    self._send(200, answer)
                elif self.path == "/v1/completions" and body.get("stream"):
                    self._sse(server.completion_chunks(body))
                elif self.path == "/v1/completions":
                    self._send(200, server.completion(body))
                else:
                    self._send(404, {"detail": "Not Found"})

            def _fail(self, kind: str) -> None:
                if kind == "truncate":  # headers promise the whole answer; half of it comes
                    data = b'{"text": "", "output_ids": [1, 2, 3], "meta_info": {"id": "x", "finish_reason"'
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(2 * len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    self.wfile.flush()
                    self.close_connection = True
                elif kind == "reset":
                    self.close_connection = True
                elif kind == "500":
                    data = b"Internal Server Error"
                    self.send_response(500)
                    self.send_header("Content-Type", "text/plain; charset=utf-8")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                elif kind == "hang":
                    server.release.wait(120)
                    self.close_connection = True
                else:
                    raise ValueError(f"unknown fault {kind!r}; known: {FAULTS}")

            def _sse(self, chunks: list[dict[str, Any]]) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                for chunk in chunks:
                    self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
                    self.wfile.flush()
                self.wfile.write(b"data: [DONE]\n\n")

            def _stream(self, answer: dict[str, Any]) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                ids = answer["output_ids"]
                for n in range(1, len(ids) + 1):  # non-incremental streaming: cumulative output_ids
                    chunk = {
                        "text": "",
                        "output_ids": ids[:n],
                        "meta_info": {**answer["meta_info"], "completion_tokens": n},
                    }
                    self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
                    self.wfile.flush()
                self.wfile.write(b"data: [DONE]\n\n")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> FakeServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def stop(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def server_args(self) -> dict[str, Any]:
        """A few of `resolved_dict()`'s fields (the real one has several hundred)."""
        return {
            "model_path": "tiny",
            "tokenizer_path": "tiny",
            "revision": None,
            "dtype": "auto",
            "kv_cache_dtype": "auto",
            "host": "127.0.0.1",
            "port": self.port,
            "random_seed": self.random_seed,
            "attention_backend": "triton",
            "enable_deterministic_inference": True,
            "speculative_algorithm": "DFLASH" if self.spec else None,
            "speculative_num_draft_tokens": 8 if self.spec else None,
            "max_running_requests": 8,
            "chunked_prefill_size": 8192,
            "disable_radix_cache": self.prefix_cache == "off",
            "mamba_ssm_dtype": "float32",
            **self.extra_args,
        }

    def server_info(self) -> dict[str, Any]:
        args = self.server_args()
        return {
            **args,
            "launch_command": f"python -m sglang.launch_server --model-path tiny --port {self.port}",
            "status": "ready",
            "max_total_num_tokens": 65536,
            "max_req_input_len": 2042,
            "startup_time": self.startup_time,
            "internal_states": [
                {
                    **args,
                    "world_size": 1,
                    "last_gen_throughput": round(random.uniform(10, 100), 2),  # live: differs per call
                    "memory_usage": {"weight": 0.001, "kvcache": 0.01, "token_capacity": 65536},
                    "startup_time": self.startup_time,
                    "effective_max_running_requests_per_dp": 8,
                }
            ],
            "version": self.version,
            "kv_events": None,
        }

    def model_info(self) -> dict[str, Any]:
        model = self.server_args()["model_path"]  # SGLang serves it under its path unless told otherwise
        return {
            "model_path": model,
            "served_model_name": model,
            "tokenizer_path": model,
            "is_generation": True,
            "preferred_sampling_params": None,
            "weight_version": "default",
            "load_format": "auto",
            "reasoning_parser": None,
            "tool_call_parser": None,
            "has_image_understanding": False,
            "has_audio_understanding": False,
            "model_type": "qwen3",
            "architectures": ["Qwen3ForCausalLM"],
        }

    def _spec_meta(self, n: int) -> dict[str, Any]:
        if not self.spec or n == 0:  # SGLang adds the counters only when spec_verify_ct > 0
            return {}
        verify = n  # every draft rejected: one verify step per token, as with SGLANG_SIMULATE_ACC_LEN=1
        return {
            "spec_accept_rate": 0.0,
            "spec_accept_length": n / verify,
            "spec_num_correct_drafts": 0,
            "spec_num_proposed_drafts": verify * 7,
            "spec_verify_ct": verify,
            "spec_accepted_drafts": 0,
            "spec_proposed_drafts": verify * 7,
        }

    def _cached(self, ids: list[int]) -> int:
        """Prompt tokens the cache supplies: the longest prefix shared with a sequence served, all but
        the last prompt token at most (its logits must be computed); for "hybrid", only up to a kept
        state (and the prefill keeps one at the last chunk boundary of a match that fell short)."""
        if self.prefix_cache not in ("on", "hybrid"):
            return 0
        best = 0
        with self.count_lock:
            for seen in self.cache:
                n = 0
                for a, b in zip(ids, seen, strict=False):
                    if a != b:
                        break
                    n += 1
                best = max(best, n)
            best = min(best, len(ids) - 1)
            if self.prefix_cache == "on":
                return best
            hashes = _prefix_hashes(ids)
            usable = next((k for k in range(best, 0, -1) if (k, hashes[k]) in self.states), 0)
            aligned = best // self.hybrid_unit * self.hybrid_unit
            if usable < aligned:
                self.states.add((aligned, hashes[aligned]))
            return usable

    def _answer(
        self, ids: list[int], new: int, k: int
    ) -> tuple[int, list[int], list[float], list[list[tuple[int, float]]]]:
        """(cached prompt tokens, ids, logprobs, top-k) of one request; the sequence is cached after."""
        cached = self._cached(ids)
        toks, chosen, top = self.backend.run(ids, new, k)
        if self.warm_drift and cached and toks:
            at = min(1, len(toks) - 1)
            moved = next_float32(chosen[at])
            if top:
                top[at] = [(t, moved if t == toks[at] else lp) for t, lp in top[at]]
            chosen = [*chosen[:at], moved, *chosen[at + 1 :]]
        if self.prefix_cache in ("on", "hybrid"):
            with self.count_lock:
                self.cache.append([*ids, *toks])
                self.states.add((len(ids) + len(toks), _prefix_hashes([*ids, *toks])[-1]))
        return cached, toks, chosen, top

    def generate(self, body: dict[str, Any]) -> dict[str, Any]:
        params = body["sampling_params"]
        k = body.get("top_logprobs_num") or 0
        # A text prompt is tokenized by the server (SGLang's tokenizer manager); here, one id per byte.
        ids = body["input_ids"] if "input_ids" in body else list(body["text"].encode())
        cached, toks, chosen, top = self._answer(ids, params["max_new_tokens"], k)
        meta: dict[str, Any] = {
            "id": f"req-{self.served}",
            "finish_reason": {"type": "length", "length": len(toks)},
            "prompt_tokens": len(ids),
            "weight_version": "default",
            "num_retractions": 0,
        }
        if body.get("return_logprob"):
            meta.update(
                input_token_logprobs=[],
                output_token_logprobs=[[lp, t, None] for t, lp in zip(toks, chosen, strict=True)],
                output_token_logprobs_length=len(toks),
                input_top_logprobs=[],
                output_top_logprobs=[[[lp, t, None] for t, lp in row] for row in top],
            )
        meta.update(
            reasoning_tokens=0,
            completion_tokens=len(toks),
            cached_tokens=cached,
            e2e_latency=0.01,
            **self._spec_meta(len(toks)),
        )
        return {"text": "".join(_text(t) for t in toks), "output_ids": toks, "meta_info": meta}

    def completion(self, body: dict[str, Any]) -> dict[str, Any]:
        prompt = body["prompt"]
        cached, toks, chosen, top = self._answer(prompt, body["max_tokens"], body.get("logprobs") or 0)
        vllm_ids = self.flavor == "vllm" and body.get("return_tokens_as_token_ids")
        name = (lambda t: f"token_id:{t}") if vllm_ids else _text
        logprobs = {
            "text_offset": [-1] * len(toks) if self.flavor == "sglang" else list(range(len(toks))),
            "token_logprobs": chosen,
            "tokens": [name(t) for t in toks],
            "top_logprobs": [{name(t): lp for t, lp in row} for row in top],
        }
        choice: dict[str, Any] = {
            "index": 0,
            "text": "".join(_text(t) for t in toks),
            "logprobs": logprobs,
            "finish_reason": "length",
        }
        if body.get("return_token_ids"):
            choice.update(token_ids=toks, prompt_token_ids=prompt)
        usage = {
            "prompt_tokens": len(prompt),
            "total_tokens": len(prompt) + len(toks),
            "completion_tokens": len(toks),
        }
        if self.flavor == "vllm" and cached:
            usage["prompt_tokens_details"] = {"cached_tokens": cached}
        response: dict[str, Any] = {
            "id": f"cmpl-{self.served}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": body["model"],
            "choices": [choice],
            "usage": usage,
        }
        if self.flavor == "sglang":
            choice.update(matched_stop=None)
            response["metadata"] = {"weight_version": "default"}
            if self.spec and body.get("return_spec_tokens_details"):
                response["sglext"] = {
                    "spec_tokens_details": {
                        **self._spec_meta(len(toks)),
                        "spec_cap_length": 0.0,
                        "spec_block_accept_length": 0.0,
                        "spec_correct_drafts_histogram": [],
                        "spec_cap_lens_histogram": [],
                    }
                }
        else:
            choice.update(stop_reason=None, prompt_logprobs=None)
            response.update(system_fingerprint=None, service_tier=None)
        return response

    def completion_chunks(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        """Streaming `/v1/completions`: one chunk per token (`choices[0].text` the delta; `token_ids` the
        delta with return_token_ids), the last with `finish_reason`, then with
        `stream_options.include_usage` a chunk with empty `choices` and `usage` (SGLang
        `serving_completions.py` `_generate_completion_stream`; vLLM `CompletionStreamResponse`)."""
        toks, _, _ = self.backend.run(body["prompt"], body["max_tokens"], 0)
        base = {
            "id": f"cmpl-{self.served}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": body["model"],
        }
        chunks = []
        for i, t in enumerate(toks):
            choice: dict[str, Any] = {
                "index": 0,
                "text": _text(t),
                "logprobs": None,
                "finish_reason": "length" if i == len(toks) - 1 else None,
            }
            if body.get("return_token_ids"):
                choice["token_ids"] = [t]
            chunks.append({**base, "choices": [choice]})
        if (body.get("stream_options") or {}).get("include_usage"):
            usage = {
                "prompt_tokens": len(body["prompt"]),
                "total_tokens": len(body["prompt"]) + len(toks),
                "completion_tokens": len(toks),
            }
            chunks.append({**base, "choices": [], "usage": usage})
        return chunks
