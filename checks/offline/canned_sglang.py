"""A real HTTP server on 127.0.0.1 answering in SGLang 0.5.20's shapes with canned, deterministic values,
for the bad-input catalogue (reliability_cases.py): what a broken or misconfigured server sends.

Shapes as pkgs/bitexact/src/bitexact/engines/sglang_shapes.py documents them from SGLang's
`srt/managers/tokenizer_manager.py` and `srt/entrypoints/http_server.py`: GET /server_info and
/model_info; POST /generate -> {"text", "output_ids", "meta_info": {"output_token_logprobs": [(logprob,
id, None)], "output_top_logprobs": [[(logprob, id, None)]], "completion_tokens", "prompt_tokens"}}, and,
streamed, `data: {...}` events ending with `data: [DONE]`. The logprob values are written with Python's
json, which writes NaN and Infinity as the non-standard literals a server with broken numerics sends.

Behaviours: `normal`; `nan` and `inf` (position 2 of every answer); `short` (half the tokens asked);
`spec` (the same values, with the speculation counters SGLang 0.5.20 adds to meta_info when a request
went through verify steps: `spec_verify_ct`, `spec_accept_length`, `spec_num_correct_drafts`,
`spec_num_proposed_drafts`); `drift` (`spec`, with the logprob at position 3 one float32 step away:
a server whose bits moved).
"""

from __future__ import annotations

import http.server
import json
import threading
from typing import Any

BEHAVIOURS = ("normal", "nan", "inf", "short", "spec", "drift")


class CannedSGLang:
    def __init__(self, behaviour: str = "normal", model_path: str = "Qwen/Qwen3.8-27B") -> None:
        if behaviour not in BEHAVIOURS:
            raise ValueError(f"behaviour {behaviour!r}: one of {BEHAVIOURS}")
        self.behaviour, self.model_path = behaviour, model_path
        canned = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _json(self, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path in ("/server_info", "/get_server_info"):
                    self._json({"version": "0.5.20", "model_path": canned.model_path, "tp_size": 1})
                elif self.path in ("/model_info", "/get_model_info"):
                    self._json({"model_path": canned.model_path, "is_generation": True})
                else:
                    self.send_error(404)

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                if self.path != "/generate":
                    self.send_error(404)
                    return
                answer = canned.answer(body)
                if not body.get("stream"):
                    self._json(answer)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                for i in range(len(answer["output_ids"])):
                    chunk = {
                        "output_ids": answer["output_ids"][: i + 1],
                        "meta_info": {"completion_tokens": i + 1},
                    }
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                final = {"output_ids": answer["output_ids"], "meta_info": answer["meta_info"]}
                self.wfile.write(f"data: {json.dumps(final)}\n\ndata: [DONE]\n\n".encode())

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        asked = int(body.get("sampling_params", {}).get("max_new_tokens", 16))
        count = max(1, asked // 2) if self.behaviour == "short" else asked
        prompt = body.get("input_ids") or [ord(c) for c in body.get("text", "")]
        ids = [(sum(prompt) + 7 * i) % 97 + 3 for i in range(count)]
        logprobs = [-0.125 * (1 + i % 5) for i in range(count)]
        if self.behaviour == "nan" and count > 2:
            logprobs[2] = float("nan")
        if self.behaviour == "inf" and count > 2:
            logprobs[2] = float("-inf")
        if self.behaviour == "drift" and count > 3:
            logprobs[3] += 2.0**-22  # -0.5 + 2**-22: the next float32 above -0.5
        top_n = int(body.get("top_logprobs_num") or 0)
        tops = [
            [(lp - k, tok + k, None) for k in range(top_n)] for tok, lp in zip(ids, logprobs, strict=True)
        ]
        meta = {
            "output_token_logprobs": [(lp, tok, None) for tok, lp in zip(ids, logprobs, strict=True)],
            "output_top_logprobs": tops if top_n else None,
            "completion_tokens": count,
            "prompt_tokens": len(prompt),
        }
        if self.behaviour in (
            "spec",
            "drift",
        ):  # two tokens per verify step: one accepted draft of 7 proposed
            steps = (count + 1) // 2
            meta.update(
                spec_verify_ct=steps,
                spec_accept_length=count / steps,
                spec_num_correct_drafts=count - steps,
                spec_num_proposed_drafts=7 * steps,
            )
        return {"text": "", "output_ids": ids, "meta_info": meta}

    def __enter__(self) -> CannedSGLang:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
