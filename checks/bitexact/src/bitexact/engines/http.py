"""A small HTTP client (standard library only) with timeouts, retries and clear errors."""

from __future__ import annotations

import json
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

from bitexact.errors import EngineError

RETRY_STATUS = {502, 503, 504}


class HttpStatusError(EngineError):
    """The server answered with an HTTP error status that is not retried (it is up, the request failed)."""


class HttpClient:
    def __init__(self, base: str, *, timeout: float = 600.0, retries: int = 3, backoff: float = 1.0) -> None:
        self.base = base
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff

    def _request(self, path: str, payload: dict[str, Any] | None) -> urllib.request.Request:
        data = None if payload is None else json.dumps(payload).encode()
        headers = {"Content-Type": "application/json"} if payload is not None else {}
        return urllib.request.Request(self.base + path, data=data, headers=headers)

    def _open(self, path: str, payload: dict[str, Any] | None, timeout: float | None = None) -> Any:
        """Open with retries on connection errors, timeouts and 502/503/504; other HTTP errors are final."""
        last: Exception | None = None
        for attempt in range(self.retries + 1):
            try:
                return urllib.request.urlopen(self._request(path, payload), timeout=timeout or self.timeout)
            except urllib.error.HTTPError as exc:
                body = exc.read().decode(errors="replace")[:800]
                if exc.code not in RETRY_STATUS:
                    raise HttpStatusError(f"{self.base}{path} answered HTTP {exc.code}: {body}") from None
                last = EngineError(f"HTTP {exc.code}: {body}")
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError) as exc:
                last = exc
            if attempt < self.retries:
                wait = self.backoff * (2**attempt)
                print(f"bitexact: {self.base}{path} failed ({last}); retry in {wait:.0f}s", file=sys.stderr)
                time.sleep(wait)
        raise EngineError(
            f"{self.base}{path} did not answer after {self.retries + 1} attempts (last error: {last}); "
            "is the server still running?"
        )

    def get_json(self, path: str, timeout: float | None = None) -> Any:
        with self._open(path, None, timeout) as response:
            return self._decode(path, response.read())

    def post_json(self, path: str, payload: dict[str, Any]) -> Any:
        try:
            with self._open(path, payload) as response:
                body = response.read()
        except (ConnectionError, TimeoutError, OSError) as exc:
            raise EngineError(
                f"{self.base}{path}: connection lost while reading the answer ({exc})"
            ) from None
        return self._decode(path, body)

    def post_stream(self, path: str, payload: dict[str, Any]) -> Iterator[Any]:
        """Server-sent events: yields each `data:` JSON object until `[DONE]`."""
        response = self._open(path, payload)
        try:
            for raw in response:
                line = raw.decode("utf-8", errors="replace").strip()
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    return
                yield self._decode(path, data.encode())
        except (ConnectionError, TimeoutError, OSError) as exc:
            raise EngineError(f"{self.base}{path}: stream broke off ({exc})") from None
        finally:
            response.close()

    def _decode(self, path: str, body: bytes) -> Any:
        try:
            data = json.loads(body)
        except json.JSONDecodeError:
            raise EngineError(
                f"{self.base}{path} answered something that is not JSON: {body[:200]!r}"
            ) from None
        if isinstance(data, dict) and ("error" in data and len(data) <= 2 or data.get("object") == "error"):
            raise EngineError(
                f"{self.base}{path} answered an error: {data.get('error') or data.get('message')}"
            )
        return data
