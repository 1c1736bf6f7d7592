"""A server in SGLang 0.5.20's shapes (bx_fake_servers.FakeServer: `/server_info`, `/model_info`,
`POST /generate`) whose `/generate` answers are scripted by the test: the fuzzer (test_bitexact_fuzz.py)
draws them, whole or broken, and the server sends them in request order, as JSON written by Python's
json (so a drawn NaN goes out as the non-standard literal a server with broken numerics sends). It
keeps what it sent, for the test's own judgement of what could have been compared. Its prefix cache is
FakeServer's (a radix of every sequence served, emptied by `/flush_cache`): an answer drawn without
`meta_info.cached_tokens` goes out with the count that cache gives, so `bitexact warm` meets hits where
SGLang's would report them."""

from __future__ import annotations

import threading
from typing import Any

from bx_fake_servers import FakeServer


class _NoModel:
    def run(self, ids: list[int], new: int, k: int) -> tuple[list[int], list[float], list[list[Any]]]:
        raise AssertionError("a scripted server answers from its script, never from a model")


class ScriptedSGLang(FakeServer):
    def __init__(self) -> None:
        super().__init__(_NoModel(), prefix_cache="on")  # type: ignore[arg-type]
        self.script: list[Any] = []
        self.sent: list[tuple[dict[str, Any], Any]] = []  # (request body, answer) in the order sent
        self.lock = threading.Lock()

    def play(self, script: list[Any]) -> None:
        """Answer the next requests with `script` (cycled), and forget what was sent before."""
        with self.lock:
            self.script, self.sent = list(script), []
        with self.count_lock:
            self.cache.clear()

    def generate(self, body: dict[str, Any]) -> Any:
        with self.lock:
            answer = self.script[len(self.sent) % len(self.script)]
            self.sent.append((body, answer))
        return self._with_hits(body.get("input_ids") or [], answer)

    def _with_hits(self, ids: list[int], answer: Any) -> Any:
        """The answer with the cached prompt tokens this server's cache gives `ids` (unless the drawn
        answer holds a count of its own, or no meta_info); the sequence is cached after."""
        cached = self._cached(ids)
        output = answer.get("output_ids") if isinstance(answer, dict) else None
        with self.count_lock:
            self.cache.append([*ids, *(output if isinstance(output, list) else [])])
        meta = answer.get("meta_info") if isinstance(answer, dict) else None
        if not isinstance(meta, dict) or "cached_tokens" in meta:
            return answer
        return {**answer, "meta_info": {**meta, "cached_tokens": cached}}

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"
