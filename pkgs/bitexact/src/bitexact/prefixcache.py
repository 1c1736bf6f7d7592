"""A server's prefix cache as a client sees it: how many prompt tokens an answer took from the cache, and
emptying the cache between cold runs.

Where the count is (read from the sources):
- SGLang's native `/generate`: `meta_info.cached_tokens`, in every answer (sglang 0.5.20
  `srt/managers/tokenizer_manager.py`, from `Req.cached_tokens`; engines/sglang_shapes.py keeps it).
- OpenAI-compatible `/v1/completions`: `usage.prompt_tokens_details.cached_tokens`, present only when
  the count is above 0 and the server is told to report it: vLLM with `--enable-prompt-tokens-details`
  (`serving_completion.py`: `if self.enable_prompt_tokens_details and final_res.num_cached_tokens`),
  SGLang with `--enable-cache-report` (`srt/entrypoints/openai/usage_processor.py`). So an absent count
  means 0 or not reported, never a hit.

How the cache is emptied:
- SGLang: `POST /flush_cache?timeout=S` (0.5.20 `srt/entrypoints/http_server.py`, GET or POST; the
  scheduler waits up to S seconds for idle, `scheduler_components/flush_wrapper.py`): 200 when flushed,
  400 with a message when not (requests running, a flush already under way); 401 under an admin API key.
- vLLM: `POST /reset_prefix_cache`, mounted only with `VLLM_SERVER_DEV_MODE=1` (else 404); it answers
  200 without checking that the reset happened, so a cold pass proves itself by showing no hits.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bitexact.engines.spec import EngineSpec
from bitexact.engines.transport import TransportFailure, exchange
from bitexact.errors import EngineError
from bitexact.generation import Generation

FLUSH_WAIT_S = 30  # how long SGLang may wait for the server to go idle before it flushes
FLUSH_PATHS = {"sglang": ("/flush_cache",), "openai": ("/reset_prefix_cache", "/flush_cache")}
ABSENT = (404, 405, 501)  # no such endpoint on this server: not asked again


def prompt_tokens(gen: Generation) -> int | None:
    """The prompt's length in tokens as the server reports it (SGLang's `meta_info.prompt_tokens`, the
    OpenAI API's `usage.prompt_tokens`); None where it reports none."""
    usage = gen.meta.get("usage")
    counted = gen.meta.get("prompt_tokens")
    if counted is None and isinstance(usage, dict):
        counted = usage.get("prompt_tokens")
    return counted if isinstance(counted, int) and not isinstance(counted, bool) else None


def reported_cached(gen: Generation) -> Any:
    """The count of cached prompt tokens as the answer holds it (SGLang's `meta_info.cached_tokens`, the
    OpenAI API's `usage.prompt_tokens_details.cached_tokens`), unread; None where it holds none."""
    count = gen.meta.get("cached_tokens")
    if count is None:
        usage = gen.meta.get("usage")
        details = usage.get("prompt_tokens_details") if isinstance(usage, dict) else None
        count = details.get("cached_tokens") if isinstance(details, dict) else None
    return count


def cached_tokens(gen: Generation) -> int | None:
    """Prompt tokens the answer says came from the cache; None where the answer carries no count. A count
    that is none (`true`, `-3`, `"5"`, more than the prompt's tokens) is an engine error, never read as a
    hit or as none: a warm pass would count on it, a cold pass be taken as computed afresh."""
    count = reported_cached(gen)
    if count is None:
        return None
    bound = prompt_tokens(gen)
    whole = isinstance(count, int) and not isinstance(count, bool)
    if not whole or count < 0 or (bound is not None and count > bound):
        of = f" of its {bound} prompt tokens" if bound is not None else ""
        raise EngineError(
            f"prompt {gen.prompt_id!r}: the server reports {str(count)[:40]!r} cached prompt tokens{of}: "
            "not a count of them (a whole number from 0 to the prompt's length); no pass can count on it"
        )
    return count


def server_root(spec: EngineSpec) -> str:
    """Cache endpoints live beside an OpenAI-compatible server's `/v1`, not under it."""
    base = spec.target
    return base[: -len("/v1")] if base.endswith("/v1") else base


@dataclass
class CacheFlush:
    """Empties the server's prefix cache where it lets a client; keeps count of what each attempt got."""

    spec: EngineSpec
    flushed: int = 0
    failed: int = 0
    errors: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)  # endpoints still worth asking
    absent: list[str] = field(default_factory=list)  # why the others are not
    path: str | None = None  # the endpoint that worked

    def __post_init__(self) -> None:
        self.paths = list(FLUSH_PATHS.get(self.spec.kind, ()))
        if not self.paths:
            self.absent.append(f"{self.spec.kind} servers have no cache flush this tool knows")

    def flush(self) -> str | None:
        """None when the cache was emptied (as far as the server says), else why not, in words."""
        tried = [self.path] if self.path else list(self.paths)
        if not tried:
            return self._failed("; ".join(self.absent))
        reasons = []
        for path in tried:
            reason = self._post(path)
            if reason is None:
                self.path = path
                self.flushed += 1
                return None
            reasons.append(f"{path}: {reason}")
        return self._failed("; ".join(reasons))

    def _failed(self, reason: str) -> str:
        self.failed += 1
        if reason not in self.errors:
            self.errors.append(reason)
        return reason

    def _post(self, path: str) -> str | None:
        query = f"?timeout={FLUSH_WAIT_S}" if path == "/flush_cache" else ""
        try:
            answer = exchange(server_root(self.spec) + path + query, "POST", b"", {}, FLUSH_WAIT_S + 30)
        except TransportFailure as failure:  # refused, reset, timed out, redirected, ...
            return f"{failure}; {failure.hint}"
        if answer.status < 300:
            return None
        body = answer.body.decode("utf-8", errors="replace").strip()[:200]
        reason = f"HTTP {answer.status}" + (f" ({body})" if body else "")
        if answer.status in ABSENT and path in self.paths:
            self.paths.remove(path)  # not there: asking again before every prompt would change nothing
            self.absent.append(f"{path}: {reason}")
            self.path = None if self.path == path else self.path
        return reason

    def to_json(self) -> dict[str, Any]:
        return {"endpoint": self.path, "flushed": self.flushed, "failed": self.failed, "errors": self.errors}
