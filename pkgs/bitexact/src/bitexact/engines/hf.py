"""In-process Hugging Face transformers: greedy generate, optionally batched (left padding) or assisted
by a draft model (transformers' speculative decoding, one sequence at a time)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bitexact.engines.base import Settings, Timing
from bitexact.engines.modelfiles import model_fingerprint
from bitexact.engines.spec import EngineSpec
from bitexact.errors import EngineError, UsageError
from bitexact.generation import Generation, SpecStats
from bitexact.prompts import Prompt

DTYPES = ("auto", "float32", "bfloat16", "float16")


class _CallCounter:
    """Counts forward calls of a module: proof that the draft model ran, and how many verify steps."""

    def __init__(self, module: Any) -> None:
        self.calls = 0
        self._handle = module.register_forward_pre_hook(self._hook)

    def _hook(self, *_: Any) -> None:
        self.calls += 1

    def reset(self) -> None:
        self.calls = 0


class HFEngine:
    def __init__(self, spec: EngineSpec) -> None:
        try:
            import torch
            import transformers
        except ImportError as exc:
            raise UsageError(
                f"engine {spec.raw!r} needs torch and transformers: pip install 'bitexact[hf]'"
            ) from exc
        self._torch = torch
        self.label = spec.raw
        self.group_size = spec.int_param("batch", 1)
        self.device = spec.params.get("device", "cpu")
        if self.device.startswith("cuda") and not torch.cuda.is_available():
            raise EngineError(f"engine {spec.raw!r}: device=cuda but torch sees no CUDA device")
        dtype_name = spec.params.get("dtype", "auto")
        if dtype_name not in DTYPES:
            raise UsageError(f"engine {spec.raw!r}: dtype must be one of {DTYPES}")
        dtype: Any = "auto" if dtype_name == "auto" else getattr(torch, dtype_name)
        self.model_path = spec.target
        self.model = self._load(transformers, spec.target, dtype)
        self.assistant = None
        self.assistant_path = spec.params.get("assistant")
        if self.assistant_path:
            self.assistant = self._load(transformers, self.assistant_path, dtype)
            self._draft_calls = _CallCounter(self.assistant)
        self._target_calls = _CallCounter(self.model)
        self.pad_id = self._pad_id()
        self.versions = {"torch": torch.__version__, "transformers": transformers.__version__}

    def _load(self, transformers: Any, path: str, dtype: Any) -> Any:
        if not Path(path).is_dir():
            raise UsageError(f"model path {path!r} is not a local folder (hf: engines load from disk only)")
        model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
        return model.to(self.device).eval()

    def _pad_id(self) -> int:
        cfg = self.model.config
        for value in (getattr(cfg, "pad_token_id", None), getattr(cfg, "eos_token_id", None), 0):
            if isinstance(value, list):
                value = value[0] if value else None
            if value is not None:
                return int(value)
        return 0

    def identity(self) -> dict[str, Any]:
        torch = self._torch
        ident: dict[str, Any] = {
            "engine": "hf",
            "model": self.model.config.name_or_path,
            "dtype": str(self.model.dtype).removeprefix("torch."),
            "batch": self.group_size,
            "assistant": self.assistant_path,
            "device": self.device,
            **self.versions,
            "model_files_sha256": model_fingerprint(self.model_path),
        }
        if self.assistant_path:
            ident["assistant_files_sha256"] = model_fingerprint(self.assistant_path)
        if self.device.startswith("cuda"):
            ident["cuda"] = torch.version.cuda
            ident["gpu"] = torch.cuda.get_device_name(torch.device(self.device))
        return ident

    def _ids(self, prompt: Prompt) -> list[int]:
        if prompt.input_ids is None:
            raise UsageError(
                f"prompt {prompt.id!r} is text: hf engines take input_ids; pass --tokenizer PATH (or 'bytes')"
            )
        vocab = int(self.model.config.vocab_size)
        if max(prompt.input_ids) >= vocab:
            raise UsageError(f"prompt {prompt.id!r} has ids >= the model's vocab size {vocab}")
        return list(prompt.input_ids)

    def _generate_kwargs(self, max_new_tokens: int) -> dict[str, Any]:
        from transformers import GenerationConfig

        config = GenerationConfig(
            do_sample=False,
            max_new_tokens=max_new_tokens,
            min_new_tokens=0,
            eos_token_id=None,
            pad_token_id=self.pad_id,
        )
        kwargs: dict[str, Any] = {"generation_config": config}
        if self.assistant is not None:
            kwargs["assistant_model"] = self.assistant
        return kwargs

    def generate(self, prompts: list[Prompt], settings: Settings) -> Iterator[Generation]:
        torch = self._torch
        rows = [self._ids(p) for p in prompts]
        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, row in enumerate(rows):  # left padding, as decoder-only generation requires
            ids[i, width - len(row) :] = torch.tensor(row)
            mask[i, width - len(row) :] = 1
        self._target_calls.reset()
        if self.assistant is not None:
            self._draft_calls.reset()
        start = time.perf_counter()
        try:
            with torch.no_grad():
                out = self.model.generate(
                    input_ids=ids.to(self.device),
                    attention_mask=mask.to(self.device),
                    return_dict_in_generate=True,
                    output_logits=True,
                    **self._generate_kwargs(settings.max_new_tokens),
                )
        except RuntimeError as exc:
            raise EngineError(f"transformers generate failed: {exc}") from exc
        elapsed = time.perf_counter() - start
        new = out.sequences[:, width:].cpu()
        logits = torch.stack(out.logits, dim=1).float()  # (batch, new tokens, vocab), raw (pre-processor)
        logp = torch.log_softmax(logits, dim=-1).cpu()
        k = settings.top_logprobs
        top_v, top_i = logp.topk(k, dim=-1) if k > 0 else (None, None)
        spec = None
        if self.assistant is not None:
            spec = SpecStats(
                verify_ct=self._target_calls.calls if self._draft_calls.calls else 0,
                accept_length=new.shape[1] / max(self._target_calls.calls, 1),
                source=f"forward calls: draft {self._draft_calls.calls}, target {self._target_calls.calls}",
            )
        for b, prompt in enumerate(prompts):
            tokens = new[b].tolist()
            chosen = logp[b].gather(-1, new[b].unsqueeze(-1)).squeeze(-1).tolist()
            top = []
            if top_v is not None and top_i is not None:
                top = [
                    list(zip(i_row, v_row, strict=True))
                    for i_row, v_row in zip(top_i[b].tolist(), top_v[b].tolist(), strict=True)
                ]
            yield Generation(
                prompt_id=prompt.id,
                token_ids=tokens,
                logprobs=chosen,
                top_logprobs=top,
                spec=spec,
                latency_s=elapsed,
                meta={"prompt_tokens": len(rows[b]), "batch": len(prompts)},
            )

    def timed(self, prompt: Prompt, max_new_tokens: int) -> Timing:
        torch = self._torch
        from transformers.generation.streamers import BaseStreamer

        stamps: list[tuple[float, int]] = []  # (time, tokens delivered then)
        cuda = self.device.startswith("cuda")

        class _Clock(BaseStreamer):
            """The first put() is the prompt; every later one delivers new tokens (several at once when
            a draft was accepted)."""

            def __init__(self) -> None:
                self.seen_prompt = False

            def put(self, value: Any) -> None:
                if self.seen_prompt:
                    if cuda:
                        torch.cuda.synchronize()
                    stamps.append((time.perf_counter(), int(value.numel())))
                self.seen_prompt = True

            def end(self) -> None:
                pass

        ids = torch.tensor([self._ids(prompt)], device=self.device)
        if cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        with torch.no_grad():
            self.model.generate(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                streamer=_Clock(),
                **self._generate_kwargs(max_new_tokens),
            )
        if not stamps:
            raise EngineError("transformers produced no tokens")
        first_time, first_count = stamps[0]
        total = sum(count for _, count in stamps)
        return Timing(
            prompt_tokens=int(ids.shape[1]),
            new_tokens=total - first_count + 1,
            ttft_s=first_time - start,
            decode_s=stamps[-1][0] - first_time,
        )

    def close(self) -> None:
        pass
