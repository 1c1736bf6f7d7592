"""An independent computation of what bitexact should find, written directly against transformers and
torch (no bitexact code): greedy generation, logprobs, top-k, and the first position where two runs differ."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def generate(
    model_dir: Path, rows: list[list[int]], new: int, k: int, assistant_dir: Path | None = None
) -> list[Any]:
    """Per row: (new token ids tensor, chosen logprobs tensor, top-k values, top-k ids), all in one batch."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    kwargs: dict[str, Any] = {}
    if assistant_dir is not None:
        kwargs["assistant_model"] = AutoModelForCausalLM.from_pretrained(assistant_dir).eval()
    width = max(len(r) for r in rows)
    pad = 0
    ids = torch.tensor([[pad] * (width - len(r)) + r for r in rows])
    mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows])
    with torch.no_grad():
        out = model.generate(
            input_ids=ids,
            attention_mask=mask,
            do_sample=False,
            max_new_tokens=new,
            eos_token_id=None,
            pad_token_id=pad,
            output_logits=True,
            return_dict_in_generate=True,
            **kwargs,
        )
    logp = torch.stack(out.logits, 1).float().log_softmax(-1)
    result = []
    for b in range(len(rows)):
        toks = out.sequences[b, width:]
        chosen = logp[b].gather(1, toks[:, None])[:, 0]
        values, indices = logp[b].topk(k, dim=-1)
        result.append((toks, chosen, values, indices))
    return result


def first_difference(x: Any, y: Any) -> int | None:
    import torch

    n = x[0].shape[0]
    for pos in range(n):
        if (
            x[0][pos] != y[0][pos]
            or not torch.equal(x[1][pos], y[1][pos])
            or not torch.equal(x[2][pos], y[2][pos])
            or not torch.equal(x[3][pos], y[3][pos])
        ):
            return pos
    return None
