"""Parse an engine string (`sglang+http://...`, `openai+http://.../v1?model=...`, `hf:PATH?...`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from bitexact.errors import UsageError

N = TypeVar("N", int, float)

KINDS = ("sglang", "openai", "hf", "sglang-engine")
HF_KEYS = {"device", "batch", "assistant", "dtype"}
HTTP_KEYS = {"timeout", "retries"}
EXAMPLES = (
    "sglang+http://127.0.0.1:30000, openai+http://127.0.0.1:8000/v1?model=NAME, "
    "hf:/path/to/model?device=cuda&batch=8, sglang-engine:/path/to/model?attention_backend=triton"
)


@dataclass(frozen=True)
class EngineSpec:
    kind: str
    target: str  # base URL for HTTP engines, model path for in-process ones
    params: dict[str, str] = field(default_factory=dict)
    raw: str = ""

    def int_param(self, key: str, default: int) -> int:
        return self._positive(key, default, int, "an integer")

    def float_param(self, key: str, default: float) -> float:
        return self._positive(key, default, float, "a number")

    def _positive(self, key: str, default: N, parse: Callable[[str], N], kind: str) -> N:
        value = self.params.get(key)
        if value is None:
            return default
        try:
            number = parse(value)
        except ValueError:
            raise UsageError(f"engine {self.raw!r}: {key}={value!r} is not {kind}") from None
        if not number > 0:
            raise UsageError(f"engine {self.raw!r}: {key} must be > 0")
        return number


def _query(raw: str, query: str) -> dict[str, str]:
    pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=False)
    params: dict[str, str] = {}
    for key, value in pairs:
        if key in params:
            raise UsageError(f"engine {raw!r}: option {key!r} given twice")
        params[key] = value
    return params


def parse_engine(raw: str) -> EngineSpec:
    if raw.startswith(("sglang+http://", "sglang+https://", "openai+http://", "openai+https://")):
        kind, url = raw.split("+", 1)
        parts = urlsplit(url)
        if not parts.hostname:
            raise UsageError(f"engine {raw!r}: no host; e.g. {EXAMPLES}")
        try:
            port = parts.port  # urllib checks the port only when asked
        except ValueError:
            port = 0
        if port == 0:
            raise UsageError(f"engine {raw!r}: the port must be a number from 1 to 65535")
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
