"""A server in SGLang 0.5.20's shapes (bx_fake_servers.FakeServer: `/server_info`, `/model_info`,
`POST /generate`, and its OpenAI-compatible `POST /v1/completions`) whose answers are scripted by the
test: the fuzzer (test_bitexact_fuzz_*.py) draws them, whole or broken, and the server sends them in
request order, whichever API was asked. An answer is written as JSON by `render` below, not by
Python's json: so that it can hold what Python's writer never writes but a broken server can send, a
key twice in one object (`Twice`) and a number spelled as drawn (`Digits`: 5000 digits, 1e400); a
drawn NaN goes out as the non-standard literal a server with broken numerics sends. It keeps the bytes
it sent, for the test's own judgement of what could have been compared. Its prefix cache is
FakeServer's (a radix of every sequence served, emptied by `/flush_cache`): a native answer drawn
without `meta_info.cached_tokens` goes out with the count that cache gives, so that `bitexact warm`
meets hits where SGLang's would report them."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import Any

from checkhelpers.bx_fake_servers import FakeServer


@dataclass(frozen=True)
class Digits:
    """A JSON number written exactly as `text` (any length, any exponent)."""

    text: str


@dataclass(frozen=True)
class Twice:
    """An answer whose object at `at` (a path of keys and indices from the top) is written with `key`
    once more at its end, with `value`: a key twice in one object. Where `at` names no object of the
    answer (an edit replaced it), the answer is written as it is."""

    answer: Any
    at: tuple[Any, ...]
    key: str
    value: Any


def render(value: Any, twice: Twice | None = None, at: tuple[Any, ...] = ()) -> str:
    """JSON text of `value`, with `twice`'s key repeated where it says."""
    if isinstance(value, Digits):
        return value.text
    if isinstance(value, dict):
        pairs = [f"{json.dumps(str(k))}: {render(v, twice, (*at, k))}" for k, v in value.items()]
        if twice is not None and twice.at == at:
            pairs.append(f"{json.dumps(twice.key)}: {render(twice.value)}")
        return "{" + ", ".join(pairs) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(render(v, twice, (*at, i)) for i, v in enumerate(value)) + "]"
    return json.dumps(value)


class _NoModel:
    def run(self, ids: list[int], new: int, k: int) -> tuple[list[int], list[float], list[list[Any]]]:
        raise AssertionError("a scripted server answers from its script, never from a model")


class ScriptedSGLang(FakeServer):
    def __init__(self) -> None:
        super().__init__(_NoModel(), prefix_cache="on")  # type: ignore[arg-type]
        self.script: list[Any] = []
        self.sent: list[tuple[dict[str, Any], bytes]] = []  # (request body, answer's bytes) as sent
        self.lock = threading.Lock()
        base = self.httpd.RequestHandlerClass

        class Handler(base):  # type: ignore[misc, valid-type]
            def _send(self, code: int, body: Any) -> None:
                if not isinstance(body, bytes):
                    return super()._send(code, body)
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd.RequestHandlerClass = Handler

    def play(self, script: list[Any]) -> None:
        """Answer the next requests with `script` (cycled), and forget what was sent before."""
        with self.lock:
            self.script, self.sent = list(script), []
        with self.count_lock:
            self.cache.clear()

    def _next(self, body: dict[str, Any], native: bool) -> bytes:
        with self.lock:
            drawn = self.script[len(self.sent) % len(self.script)]
            twice = drawn if isinstance(drawn, Twice) else None
            answer = twice.answer if twice else drawn
            if native:
                answer = self._with_hits(body.get("input_ids") or [], answer)
            data = render(answer, twice).encode()
            self.sent.append((body, data))
        return data

    def generate(self, body: dict[str, Any]) -> Any:
        return self._next(body, native=True)

    def completion(self, body: dict[str, Any]) -> Any:
        return self._next(body, native=False)

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
