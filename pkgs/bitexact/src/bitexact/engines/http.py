"""A small HTTP client (standard library only) with deadlines sized to the work, retries and errors that name
what failed (engines/transport.py: one exchange, no redirect followed, no unasked encoding)."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from typing import Any

from bitexact import strictjson
from bitexact.engines.transport import Exchange, TransportFailure
from bitexact.errors import EngineError

# The default per-request timeout: a floor for the round trip, plus prefill and decode at rates far
# below any GPU server's (the recipe's card prefills 128k tokens at ~1900 tokens/s and decodes 20-110
# tokens/s), so a healthy server never hits it and a hung one is noticed in minutes, not hours.
BASE_S = 60.0
PREFILL_S_PER_TOKEN = 0.002  # 500 tokens/s
DECODE_S_PER_TOKEN = 0.25  # 4 tokens/s


def request_timeout(prompt_tokens: int, new_tokens: int, inflight: int = 1) -> float:
    """Seconds to wait for one answer. Requests in flight share the server: their prefills queue."""
    return BASE_S + max(inflight, 1) * prompt_tokens * PREFILL_S_PER_TOKEN + new_tokens * DECODE_S_PER_TOKEN


def work_of(payload: dict[str, Any] | None) -> tuple[int, int]:
    """(prompt tokens, new tokens) of a generate request in SGLang's native shape (`input_ids` or
    `text`, `sampling_params.max_new_tokens`), the OpenAI completions shape (`prompt`, `max_tokens`) or
    llama.cpp's native one (`prompt`, `n_predict`); a text prompt counts one token per character (an upper
    bound for real tokenizers)."""
    if not payload:
        return 0, 0
    prompt = payload.get("input_ids", payload.get("text", payload.get("prompt")))
    new = (
        payload.get("max_tokens")
        or payload.get("n_predict")
        or (payload.get("sampling_params") or {}).get("max_new_tokens")
        or 0
    )
    return (len(prompt) if isinstance(prompt, list | str) else 0), int(new)


class HttpStatusError(EngineError):
    """The server answered with an HTTP error status that is not retried (it is up, the request failed)."""


class HttpClient:
    """`timeout`: seconds per request as the user set it, or None to size each request to its work
    (`request_timeout`, with `inflight` requests sharing the server)."""

    def __init__(
        self,
        base: str,
        *,
        timeout: float | None = None,
        retries: int = 3,
        backoff: float = 1.0,
        inflight: int = 1,
    ) -> None:
        self.base = base
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.inflight = inflight

    def timeout_for(self, payload: dict[str, Any] | None) -> float:
        if self.timeout is not None:
            return self.timeout
        return request_timeout(*work_of(payload), inflight=self.inflight)

    def _exchange(self, path: str, payload: dict[str, Any] | None, wait_s: float) -> Exchange:
        data = None if payload is None else json.dumps(payload).encode()
        headers = {"Content-Type": "application/json"} if payload is not None else {}
        return Exchange(self.base + path, "GET" if data is None else "POST", data, headers, wait_s)

    def _retrying(self, path: str, payload: dict[str, Any] | None, timeout: float | None, body: bool) -> Any:
        """The answer's JSON (`body`), or the open Exchange of a stream, retrying what a retry can cure (a
        refused or reset connection, a cut-off answer, a timeout, 5xx); a redirect, an unasked encoding,
        TLS against plain HTTP, 4xx and JSON that cannot be read one way are final. The last error says
        what it was and its fix, never a guess."""
        wait_s = timeout if timeout is not None else self.timeout_for(payload)
        last, hint = "", ""
        for attempt in range(self.retries + 1):
            try:
                ex = self._exchange(path, payload, wait_s).__enter__()
                try:
                    if not body and 200 <= ex.status < 300:
                        return ex  # the stream: the caller reads and closes it
                    answer = ex.body()
                finally:
                    if body or not 200 <= ex.status < 300:
                        ex.close()
                if answer.status >= 400:
                    text = answer.body.decode(errors="replace")[:800]
                    if answer.status < 500:
                        raise HttpStatusError(f"{self.base}{path} answered HTTP {answer.status}: {text}")
                    last, hint = f"HTTP {answer.status}: {text}", "see the server's log"
                elif not answer.body:
                    last = f"answered HTTP {answer.status} with an empty body"
                    hint = "the server (or something in front of it) answered nothing; see its log"
                else:
                    try:
                        return strictjson.loads(answer.body, non_finite=True)
                    except strictjson.UnreadableJSONError as exc:  # whole, and the same if asked again
                        raise EngineError(
                            f"{self.base}{path} answered JSON that cannot be read one way: {exc}"
                        ) from None
                    except ValueError as exc:  # cut short without a Content-Length to tell, or garbage
                        last = f"the answer is not complete JSON ({exc})"
                        hint = "the server sent a body that is not JSON; is this the engine's API?"
            except TransportFailure as failure:
                last, hint = str(failure), failure.hint
                if not failure.retry:
                    raise EngineError(f"{self.base}{path}: {failure}; {failure.hint}") from None
            if attempt < self.retries:
                pause = self.backoff * (2**attempt)
                print(f"bitexact: {self.base}{path} failed ({last}); retry in {pause:.0f}s", file=sys.stderr)
                time.sleep(pause)
        raise EngineError(f"{self.base}{path} failed {self.retries + 1} times (last error: {last}); {hint}")

    def get_json(self, path: str, timeout: float | None = 30.0) -> Any:
        return self._checked(path, self._retrying(path, None, timeout, body=True))

    def post_json(self, path: str, payload: dict[str, Any]) -> Any:
        return self._checked(path, self._retrying(path, payload, None, body=True))

    def post_stream(self, path: str, payload: dict[str, Any]) -> Iterator[Any]:
        """Server-sent events: yields each `data:` JSON object until `[DONE]`. Only the opening is
        retried; a stream that breaks off is an EngineError (its timing would be wrong anyway). The
        request's deadline covers the whole stream."""
        ex: Exchange = self._retrying(path, payload, None, body=False)
        try:
            for raw in ex.lines():
                line = raw.decode("utf-8", errors="replace").strip()
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    return
                try:
                    chunk = strictjson.loads(data, non_finite=True)
                except strictjson.StrictJSONError:
                    raise EngineError(
                        f"{self.base}{path} streamed something that is not JSON: {data[:200]!r}"
                    ) from None
                yield self._checked(path, chunk)
        except TransportFailure as failure:
            raise EngineError(f"{self.base}{path}: stream broke off ({failure}); {failure.hint}") from None
        finally:
            ex.close()

    def _checked(self, path: str, data: Any) -> Any:
        if isinstance(data, dict) and ("error" in data and len(data) <= 2 or data.get("object") == "error"):
            raise EngineError(
                f"{self.base}{path} answered an error: {data.get('error') or data.get('message')}"
            )
        return data
