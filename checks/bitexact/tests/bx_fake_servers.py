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
- SGLang `/server_info`: `http_server.py` `server_info()` (server args, `version`, ...).
- SGLang `/v1/completions`: `srt/entrypoints/openai/serving_completions.py` (`_build_completion_response`),
  `protocol.py` (CompletionResponseChoice: `token_ids`, `prompt_token_ids`, `matched_stop`; LogProbs from
  `utils.to_openai_style_logprobs`: `text_offset` all -1, `top_logprobs` keyed by token text;
  `sglext.spec_tokens_details` when `return_spec_tokens_details`).
- vLLM `/v1/completions`: `vllm/entrypoints/openai/protocol.py` (CompletionResponseChoice: `token_ids`,
  `prompt_token_ids` with `return_token_ids`; CompletionLogProbs `tokens`/`top_logprobs` keys written as
  `token_id:N` with `return_tokens_as_token_ids`; `stop_reason`), `/v1/models` list.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


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


def _text(token_id: int) -> str:
    return f"<{token_id}>"  # the tiny model has no tokenizer; a unique text per id, as a real one gives


class FakeServer:
    """flavor: 'sglang' (native + OpenAI-compatible) or 'vllm' (OpenAI-compatible only).
    spec: report speculative decoding stats. die_after: stop answering after that many generate requests."""

    def __init__(
        self,
        backend: Backend,
        flavor: str = "sglang",
        spec: bool = False,
        port: int = 0,
        die_after: int | None = None,
    ) -> None:
        self.backend, self.flavor, self.spec, self.die_after = backend, flavor, spec, die_after
        self.requests: list[dict[str, Any]] = []
        self.served = 0
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

            def do_GET(self) -> None:
                if self.path in ("/server_info", "/get_server_info") and server.flavor == "sglang":
                    self._send(200, server.server_info())
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
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if server.die_after is not None and server.served >= server.die_after:
                    self.close_connection = True  # the server "crashed": drop the request unanswered
                    threading.Thread(target=server.stop, daemon=True).start()
                    return
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
        self.httpd.shutdown()
        self.httpd.server_close()

    def server_info(self) -> dict[str, Any]:
        return {
            "model_path": "tiny",
            "attention_backend": "triton",
            "enable_deterministic_inference": True,
            "speculative_algorithm": "DFLASH" if self.spec else None,
            "max_running_requests": 8,
            "version": "0.5.20",
            "launch_command": "python -m sglang.launch_server --model-path tiny",
        }

    def _spec_meta(self, n: int) -> dict[str, Any]:
        if not self.spec:
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

    def generate(self, body: dict[str, Any]) -> dict[str, Any]:
        params = body["sampling_params"]
        k = body.get("top_logprobs_num") or 0
        toks, chosen, top = self.backend.run(body["input_ids"], params["max_new_tokens"], k)
        meta: dict[str, Any] = {
            "id": f"req-{self.served}",
            "finish_reason": {"type": "length", "length": len(toks)},
            "prompt_tokens": len(body["input_ids"]),
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
            cached_tokens=0,
            e2e_latency=0.01,
            **self._spec_meta(len(toks)),
        )
        return {"text": "".join(_text(t) for t in toks), "output_ids": toks, "meta_info": meta}

    def completion(self, body: dict[str, Any]) -> dict[str, Any]:
        prompt = body["prompt"]
        toks, chosen, top = self.backend.run(prompt, body["max_tokens"], body.get("logprobs") or 0)
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
