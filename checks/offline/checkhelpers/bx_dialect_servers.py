"""A local server (127.0.0.1) answering `/v1/completions` in logprob dialects of servers that cannot run
on this machine, backed by a real transformers model (bx_fake_servers.Backend). llama.cpp's own dialect
is tested against the real server (test_bitexact_llama_server.py); these are the others.

Dialects, each written from its server's source (vLLM as the search index stores vllm-project/vllm:
`completion/protocol.py` at commit 002032ee, `v1/spec_decode/metrics.py` at 016a8587, `serving_engine.py`
`_get_decoded_token` as in v0.8.3; SGLang from the 0.5.20 wheel):
- `text-only`: the legacy completions shape with tokens and top-logprob keys as decoded text and no
  token ids, as a server answers that knows neither `return_token_ids` nor `return_tokens_as_token_ids`
  (the OpenAI legacy shape; vLLM's CompletionLogProbs in `vllm/entrypoints/openai/completion/protocol.py`,
  whose text is `tokenizer.decode([token_id])` in `_get_decoded_token`, `vllm/entrypoints/openai/
  serving_engine.py`, when the request asks for no ids).
- `chat-style`: `logprobs.content[]` entries `{token, bytes, logprob, top_logprobs: [{token, bytes,
  logprob}]}` without ids, the OpenAI chat shape as SGLang 0.5.20 writes it
  (`srt/entrypoints/openai/protocol.py`: ChoiceLogprobs, ChatCompletionTokenLogprob, TopLogprob).
- `vllm-spec`: vLLM's answer with `return_tokens_as_token_ids` (`token_id:N`) and `return_token_ids`,
  and a speculative server's `/metrics`: the counters of `vllm/v1/spec_decode/metrics.py`
  (SpecDecodingProm: `vllm:spec_decode_num_drafts`, `..._num_draft_tokens`, `..._num_accepted_tokens`,
  `..._num_accepted_tokens_per_pos`, labels `model_name` and `engine`) in prometheus_client's text
  exposition (`# HELP`, `# TYPE`, the `_total` sample and a `_created` sample per counter). Each request
  adds one draft of 3 tokens per generated token, none accepted.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from checkhelpers.bx_fake_servers import Backend

SPEC_TOKENS = 3
COUNTERS = (
    ("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.", "drafts"),
    ("vllm:spec_decode_num_draft_tokens", "Number of draft tokens.", "draft_tokens"),
    ("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.", "accepted"),
)


class DialectServer:
    def __init__(self, backend: Backend, dialect: str, tokenizer: Path | None = None) -> None:
        self.backend, self.dialect = backend, dialect
        self.decode = self._decoder(tokenizer)
        self.requests: list[dict[str, Any]] = []
        self.counts = {"drafts": 0, "draft_tokens": 0, "accepted": 0}
        self.created = time.time()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, code: int, data: bytes, kind: str = "application/json") -> None:
                self.send_response(code)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path == "/v1/models":
                    card = {"id": "tiny", "object": "model", "owned_by": "vllm", "root": "tiny"}
                    self._send(200, json.dumps({"object": "list", "data": [card]}).encode())
                elif self.path == "/metrics" and server.dialect == "vllm-spec":
                    self._send(200, server.metrics().encode(), "text/plain; version=0.0.4")
                else:
                    self._send(404, b'{"detail": "Not Found"}')

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(body)
                if self.path != "/v1/completions":
                    return self._send(404, b'{"detail": "Not Found"}')
                self._send(200, json.dumps(server.completion(body)).encode())

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @staticmethod
    def _decoder(tokenizer: Path | None) -> Any:
        if tokenizer is None:
            return lambda t: f"<{t}>"
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(tokenizer)
        return lambda t: tok.decode([t])

    def __enter__(self) -> DialectServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def metrics(self) -> str:
        labels = 'engine="0",model_name="tiny"'
        lines = []
        for name, help_text, key in COUNTERS:
            lines += [f"# HELP {name}_total {help_text}", f"# TYPE {name}_total counter"]
            lines += [f"{name}_total{{{labels}}} {float(self.counts[key])}"]
            lines += [f"{name}_created{{{labels}}} {self.created}"]
        per_pos = "vllm:spec_decode_num_accepted_tokens_per_pos"
        lines += [
            f"# HELP {per_pos}_total Accepted tokens per draft position.",
            f"# TYPE {per_pos}_total counter",
        ]
        lines += [f'{per_pos}_total{{{labels},position="{p}"}} 0.0' for p in range(SPEC_TOKENS)]
        return "\n".join(lines) + "\n"

    def completion(self, body: dict[str, Any]) -> dict[str, Any]:
        prompt = body["prompt"]
        toks, chosen, top = self.backend.run(prompt, body["max_tokens"], body.get("logprobs") or 0)
        choice: dict[str, Any] = {
            "index": 0,
            "text": "".join(self.decode(t) for t in toks),
            "finish_reason": "length",
        }
        if self.dialect == "chat-style":
            choice["logprobs"] = {
                "content": [
                    {
                        "token": self.decode(t),
                        "bytes": list(self.decode(t).encode()),
                        "logprob": lp,
                        "top_logprobs": [
                            {"token": self.decode(a), "bytes": list(self.decode(a).encode()), "logprob": alp}
                            for a, alp in row
                        ],
                    }
                    for t, lp, row in zip(toks, chosen, top, strict=True)
                ]
            }
        else:
            as_ids = self.dialect == "vllm-spec" and body.get("return_tokens_as_token_ids")
            name = (lambda t: f"token_id:{t}") if as_ids else self.decode
            choice["logprobs"] = {
                "text_offset": list(range(len(toks))),
                "token_logprobs": chosen,
                "tokens": [name(t) for t in toks],
                "top_logprobs": [{name(a): alp for a, alp in row} for row in top],
            }
            if self.dialect == "vllm-spec" and body.get("return_token_ids"):
                choice.update(token_ids=toks, prompt_token_ids=prompt)
        if self.dialect == "vllm-spec":
            self.counts["drafts"] += len(toks)
            self.counts["draft_tokens"] += SPEC_TOKENS * len(toks)
        usage = {
            "prompt_tokens": len(prompt),
            "total_tokens": len(prompt) + len(toks),
            "completion_tokens": len(toks),
        }
        return {
            "id": f"cmpl-{len(self.requests)}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": body["model"],
            "choices": [choice],
            "usage": usage,
        }
