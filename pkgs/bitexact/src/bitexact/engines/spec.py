"""Parse an engine string (`sglang+http://...`, `openai+http://.../v1?model=...`, `hf:PATH?...`)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from bitexact.errors import UsageError
from bitexact.strictjson import unique

N = TypeVar("N", int, float)
WHOLE = re.compile(r"-?[0-9]+")
NUMBER = re.compile(r"-?([0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?|inf|nan)", re.IGNORECASE)  # inf: named after

KINDS = ("sglang", "openai", "llamacpp", "hf", "sglang-engine")
HTTP_KINDS = ("sglang", "openai", "llamacpp")
HF_KEYS = {"device", "batch", "assistant", "dtype"}
HTTP_KEYS = {"timeout", "retries"}
# Options that change how a client waits, never what an engine answers: they key no results.
TRANSPORT_KEYS = {"timeout", "retries"}
ZERO_ALLOWED = {"retries"}  # retries=0: one attempt
# Far above any real use, below what overflows a socket's timeout or a thread pool.
MAXIMA = {"timeout": 7 * 86400, "retries": 100, "batch": 4096}
LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1"}
EXAMPLES = (
    "sglang+http://127.0.0.1:30000, openai+http://127.0.0.1:8000/v1?model=NAME, "
    "llamacpp+http://127.0.0.1:8080, hf:/path/to/model?device=cuda&batch=8, "
    "sglang-engine:/path/to/model?attention_backend=triton"
)


@dataclass(frozen=True)
class EngineSpec:
    kind: str
    target: str  # base URL for HTTP engines, model path for in-process ones
    params: dict[str, str] = field(default_factory=dict)
    raw: str = ""

    def canonical_params(self) -> dict[str, str]:
        """The options that change what the engine computes (all but the transport options)."""
        return {k: v for k, v in self.params.items() if k not in TRANSPORT_KEYS}

    @property
    def canonical(self) -> str:
        """The engine string without transport options (timeout, retries), options sorted: what
        names stored results, so `?retries=5` does not throw a valid resume away."""
        kept = sorted(self.canonical_params().items())
        query = f"?{urlencode(kept)}" if kept else ""
        if self.kind in HTTP_KINDS:
            return f"{self.kind}+{self.target}{query}"
        return f"{self.kind}:{self.target}{query}"

    @property
    def local(self) -> bool:
        """Runs on this machine's hardware: in process, or a server on the loopback interface."""
        if self.kind in HTTP_KINDS:
            return (urlsplit(self.target).hostname or "") in LOOPBACK_HOSTS
        return True

    def timeout_s(self) -> float | None:
        """`?timeout=SECONDS` as given; None sizes each request to its work (engines/http.py)."""
        return self.float_param("timeout", 1.0) if "timeout" in self.params else None

    def int_param(self, key: str, default: int) -> int:
        return self._positive(key, default, int, "an integer")

    def float_param(self, key: str, default: float) -> float:
        return self._positive(key, default, float, "a number")

    def _positive(self, key: str, default: N, parse: Callable[[str], N], kind: str) -> N:
        value = self.params.get(key)
        if value is None:
            return default
        form = WHOLE if parse is int else NUMBER
        try:
            # The pattern first: int() and float() also read "1_0" as 10, and non-ASCII digits
            number = parse(value) if form.fullmatch(value) else parse("x")
        except ValueError:
            raise UsageError(f"engine {self.raw!r}: {key}={value!r} is not {kind}") from None
        if not (number >= 0 if key in ZERO_ALLOWED else number > 0):
            relation = ">= 0" if key in ZERO_ALLOWED else "> 0"
            raise UsageError(f"engine {self.raw!r}: {key} must be {relation}")
        if not number <= MAXIMA.get(key, number):  # also refuses inf and nan
            raise UsageError(f"engine {self.raw!r}: {key} must be {MAXIMA[key]} or less, not {value}")
        return number


def _query(raw: str, query: str) -> dict[str, str]:
    pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=False)
    return unique(pairs, lambda key: UsageError(f"engine {raw!r}: option {key!r} given twice"))


def parse_engine(raw: str) -> EngineSpec:
    if raw.startswith(tuple(f"{kind}+{scheme}://" for kind in HTTP_KINDS for scheme in ("http", "https"))):
        kind, url = raw.split("+", 1)
        parts = urlsplit(url)
        if not parts.hostname:
            raise UsageError(f"engine {raw!r}: no host; e.g. {EXAMPLES}")
        if "@" in parts.netloc or parts.fragment or url.endswith("#"):
            # urllib would send "user:pw@host" to the resolver as a host name, and every message and
            # report would print the password; a "#..." is dropped by the client without a word
            raise UsageError(
                f"engine {raw!r}: give the server as {kind}+{parts.scheme}://host:port[/path][?options], "
                "without a user name or password before the host and without a '#' part"
            )
        try:
            port = parts.port  # urllib checks the port only when asked
        except ValueError:
            port = 0
        if port == 0:
            raise UsageError(f"engine {raw!r}: the port must be a number from 1 to 65535")
        if port is None:  # urllib would use 80 or 443 silently; no inference server listens there
            raise UsageError(
                f"engine {raw!r}: no port; give it explicitly, e.g. {kind}+{parts.scheme}://"
                f"{parts.hostname}:30000 (SGLang's default) or :8000 (vLLM's)"
            )
        params = _query(raw, parts.query)
        allowed = HTTP_KEYS | ({"model"} if kind == "openai" else set())
        unknown = sorted(set(params) - allowed)
        if unknown:
            raise UsageError(f"engine {raw!r}: unknown option(s) {unknown}; allowed: {sorted(allowed)}")
        if kind == "openai" and not params.get("model"):
            raise UsageError(f"engine {raw!r}: OpenAI-compatible engines need ?model=NAME (the served name)")
        base = urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/"), "", ""))
        spec = EngineSpec(kind=kind, target=base, params=params, raw=raw)
        spec.float_param("timeout", 1.0)  # bad values are usage errors now, not at the first request
        spec.int_param("retries", 1)
        return spec
    if raw.startswith(("hf:", "sglang-engine:")):
        kind, rest = raw.split(":", 1)
        path, _, query = rest.partition("?")
        if not path:
            raise UsageError(f"engine {raw!r}: no model path")
        params = _query(raw, query)
        if kind == "hf":
            unknown = sorted(set(params) - HF_KEYS)
            if unknown:
                raise UsageError(f"engine {raw!r}: unknown option(s) {unknown}; allowed: {sorted(HF_KEYS)}")
            spec = EngineSpec(kind=kind, target=path, params=params, raw=raw)
            spec.int_param("batch", 1)
            device = params.get("device", "cpu")
            if device not in ("cpu", "cuda") and not device.startswith("cuda:"):
                raise UsageError(f"engine {raw!r}: device must be cpu or cuda, not {device!r}")
            if "assistant" in params and spec.int_param("batch", 1) > 1:
                raise UsageError(
                    f"engine {raw!r}: assistant (speculative decoding) runs one sequence at a time in "
                    "transformers; drop batch or set batch=1"
                )
            return spec
        return EngineSpec(kind=kind, target=path, params=params, raw=raw)
    raise UsageError(f"engine {raw!r}: unknown form; use one of {EXAMPLES}")
