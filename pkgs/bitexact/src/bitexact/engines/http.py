"""A small HTTP client (standard library only) with timeouts sized to the work, retries and clear errors."""

from __future__ import annotations

import http.client
import json
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from bitexact import strictjson
from bitexact.errors import EngineError

T = TypeVar("T")

# What a retry can cure: the connection failed, broke off (a reset, a truncated body: IncompleteRead),
# timed out, or the server answered 5xx. 4xx means the request itself is wrong; it is not retried.
TRANSPORT_ERRORS = (urllib.error.URLError, http.client.HTTPException, ConnectionError, TimeoutError, OSError)

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


def _describe(exc: BaseException) -> str:
    if isinstance(exc, http.client.IncompleteRead):
        return f"the answer was cut off after {len(exc.partial)} bytes (IncompleteRead)"
    if isinstance(exc, urllib.error.URLError) and not isinstance(exc, urllib.error.HTTPError):
        return f"{type(exc.reason).__name__}: {exc.reason}"
    return f"{type(exc).__name__}: {exc}"


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

    def _request(self, path: str, payload: dict[str, Any] | None) -> urllib.request.Request:
        data = None if payload is None else json.dumps(payload).encode()
        headers = {"Content-Type": "application/json"} if payload is not None else {}
        return urllib.request.Request(self.base + path, data=data, headers=headers)

    def _call(
        self, path: str, payload: dict[str, Any] | None, read: Callable[[Any], T], timeout: float | None
    ) -> T:
        """Open and read the answer (`read` may keep the response open by returning it), retrying
        transport failures, a body cut short included; other HTTP errors are final."""
        wait_s = timeout if timeout is not None else self.timeout_for(payload)
        last = ""
        for attempt in range(self.retries + 1):
            try:
                response = urllib.request.urlopen(self._request(path, payload), timeout=wait_s)
                try:
                    result = read(response)
                except BaseException:
                    response.close()
                    raise
                if result is not response:
                    response.close()
                return result
            except urllib.error.HTTPError as exc:
                try:
                    body = exc.read().decode(errors="replace")[:800]
                except TRANSPORT_ERRORS:
                    body = "(body unreadable)"
                if exc.code < 500:
                    raise HttpStatusError(f"{self.base}{path} answered HTTP {exc.code}: {body}") from None
                last = f"HTTP {exc.code}: {body}"
            except TRANSPORT_ERRORS as exc:
                last = _describe(exc)
                if isinstance(exc, TimeoutError) or "timed out" in last:
                    last += f" (no answer within {wait_s:.0f} s; set ?timeout=SECONDS to wait longer)"
            except strictjson.UnreadableJSONError as exc:  # whole, and the same if asked again
                raise EngineError(
                    f"{self.base}{path} answered JSON that cannot be read one way: {exc}"
                ) from None
            except ValueError as exc:  # a body cut short without a Content-Length to tell, or garbage
                last = f"the answer is not complete JSON ({exc})"
            if attempt < self.retries:
                pause = self.backoff * (2**attempt)
                print(f"bitexact: {self.base}{path} failed ({last}); retry in {pause:.0f}s", file=sys.stderr)
                time.sleep(pause)
        raise EngineError(
            f"{self.base}{path} failed {self.retries + 1} times (last error: {last}); "
            "is the server still running?"
        )

    def get_json(self, path: str, timeout: float | None = 30.0) -> Any:
        return self._checked(path, self._call(path, None, _read_json, timeout))

    def post_json(self, path: str, payload: dict[str, Any]) -> Any:
        return self._checked(path, self._call(path, payload, _read_json, None))

    def post_stream(self, path: str, payload: dict[str, Any]) -> Iterator[Any]:
        """Server-sent events: yields each `data:` JSON object until `[DONE]`. Only the connection is
        retried; a stream that breaks off is an EngineError (its timing would be wrong anyway)."""
        response = self._call(path, payload, lambda r: r, None)
        try:
            for raw in response:
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
        except TRANSPORT_ERRORS as exc:
            raise EngineError(f"{self.base}{path}: stream broke off ({_describe(exc)})") from None
        finally:
            response.close()

    def _checked(self, path: str, data: Any) -> Any:
        if isinstance(data, dict) and ("error" in data and len(data) <= 2 or data.get("object") == "error"):
            raise EngineError(
                f"{self.base}{path} answered an error: {data.get('error') or data.get('message')}"
            )
        return data


def _read_json(response: Any) -> Any:
    return strictjson.loads(response.read(), non_finite=True)
