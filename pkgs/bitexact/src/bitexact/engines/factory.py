"""Engine string -> engine object."""

from __future__ import annotations

from bitexact.engines.base import Engine
from bitexact.engines.spec import EngineSpec


def open_engine(spec: EngineSpec, inflight: int = 1, tokenizer: str | None = None) -> Engine:
    """The engine `spec` names (parse_engine made it, once, from the command line). `inflight`: requests
    sent at once by HTTP engines (`hf:` engines batch by their `batch=` option).
    `tokenizer` (`--tokenizer`): maps token text to ids for OpenAI-compatible answers that carry no ids."""
    if spec.kind == "sglang":
        from bitexact.engines.sglang_http import SGLangHttpEngine

        return SGLangHttpEngine(spec, inflight)
    if spec.kind == "openai":
        from bitexact.engines.openai_http import OpenAIHttpEngine

        return OpenAIHttpEngine(spec, inflight, tokenizer)
    if spec.kind == "llamacpp":
        from bitexact.engines.llamacpp_http import LlamaCppHttpEngine

        return LlamaCppHttpEngine(spec, inflight)
    if spec.kind == "hf":
        from bitexact.engines.hf import HFEngine

        return HFEngine(spec)
    from bitexact.engines.sglang_engine import SGLangOfflineEngine

    return SGLangOfflineEngine(spec, inflight)
