"""HTTP to a served SGLang: one POST (its failure a RunError naming the path), and a streaming /generate
in the background that counts the chunks carrying tokens."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from typing import Any

from lab.perf.run_errors import RunError


def post(port: int, path: str, body: dict[str, Any] | None, timeout: float = 60) -> str:
    data = json.dumps(body).encode() if body is not None else b""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", data=data, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return answer.read().decode(errors="replace")
    except urllib.error.HTTPError as error:
        raise RunError(
            f"POST {path}: HTTP {error.code}: {error.read().decode(errors='replace')[:500]}"
        ) from None
    except (urllib.error.URLError, OSError) as error:
        raise RunError(f"POST {path}: {error}") from None


class Stream(threading.Thread):
    """One streaming /generate in the background; counts the chunks that carry tokens."""

    def __init__(self, port: int, ids: list[int], max_new_tokens: int) -> None:
        super().__init__(daemon=True)
        self.port, self.ids, self.max_new_tokens = port, ids, max_new_tokens
        self.chunks = 0
        self.error: str | None = None

    def run(self) -> None:
        body = {
            "input_ids": self.ids,
            "sampling_params": {
                "temperature": 0.0,
                "max_new_tokens": self.max_new_tokens,
                "ignore_eos": True,
            },
            "stream": True,
        }
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/generate",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=600) as answer:
                for raw in answer:
                    if raw.startswith(b"data:") and b"output_ids" in raw:
                        self.chunks += 1
        except Exception as error:  # reported by the caller, which decides whether it matters
            self.error = f"{type(error).__name__}: {error}"
