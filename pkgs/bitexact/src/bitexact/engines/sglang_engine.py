"""SGLang's offline `sglang.Engine` in this process (where sglang is importable).

Untested in this project's CI: no CPU build of SGLang exists, and the GPU machine we were lent has no
SGLang install. The output dicts are the ones `/generate` returns, so parsing is shared with the HTTP
engine (which is tested against fixtures of that shape).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from bitexact.engines.base import Settings, Timing
from bitexact.engines.modelfiles import model_fingerprint
from bitexact.engines.sglang_shapes import parse_generate_output, request_fields
from bitexact.engines.spec import EngineSpec
from bitexact.errors import EngineError, UsageError
from bitexact.generation import Generation
from bitexact.prompts import Prompt


def _coerce(value: str) -> Any:
    """Query-string values to the Python types sglang's ServerArgs expects."""
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    for cast in (int, float):
        try:
            return cast(value)
        except ValueError:
            pass
    return value


class SGLangOfflineEngine:
    def __init__(self, spec: EngineSpec, inflight: int = 1) -> None:
        try:
            import sglang
        except ImportError as exc:
            raise UsageError(f"engine {spec.raw!r}: sglang is not importable here ({exc})") from exc
        self._sglang = sglang
        self.label = spec.raw
        self.group_size = inflight
        self.kwargs = {key: _coerce(value) for key, value in spec.params.items()}
        self.model_path = spec.target
        self.engine = sglang.Engine(model_path=spec.target, **self.kwargs)

    def identity(self) -> dict[str, Any]:
        return {
            "engine": "sglang-engine",
            "version": self._sglang.__version__,
            "server_args": self.kwargs,
            "model_files_sha256": model_fingerprint(self.model_path),
        }

    def generate(self, prompts: list[Prompt], settings: Settings) -> Iterator[Generation]:
        fields = [request_fields(p, settings) for p in prompts]
        batch: dict[str, Any] = {"sampling_params": fields[0]["sampling_params"]}
        if all(p.input_ids is not None for p in prompts):
            batch["input_ids"] = [f["input_ids"] for f in fields]
        else:
            batch["prompt"] = [p.text for p in prompts]
        outs = self.engine.generate(
            **batch, return_logprob=True, top_logprobs_num=settings.top_logprobs, logprob_start_len=-1
        )
        if not isinstance(outs, list) or len(outs) != len(prompts):
            raise EngineError("sglang.Engine.generate returned something other than one result per prompt")
        for prompt, out in zip(prompts, outs, strict=True):
            yield parse_generate_output(prompt, out, settings, "sglang.Engine")

    def timed(self, prompt: Prompt, max_new_tokens: int) -> Timing:
        raise UsageError("bench with sglang-engine: not supported; start a server and use sglang+http://")

    def close(self) -> None:
        self.engine.shutdown()
