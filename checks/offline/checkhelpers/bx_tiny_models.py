"""Tiny random transformers models (fixed seeds, no download) and prompt files for the tests."""

from __future__ import annotations

import json
import random
from pathlib import Path

VOCAB = 384


def make_model(path: Path, *, layers: int, hidden: int, seed: int) -> Path:
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(seed)
    config = Qwen3Config(
        vocab_size=VOCAB,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=hidden // 4,
        max_position_embeddings=2048,
        tie_word_embeddings=False,
    )
    model = Qwen3ForCausalLM(config).eval()
    with torch.no_grad():  # peakier distributions than a random init gives, like a trained model's
        model.lm_head.weight.mul_(8)
    model.to(torch.float32).save_pretrained(path)
    return path


def write_prompts(path: Path, lengths: list[int], seed: int = 7) -> Path:
    rng = random.Random(seed)
    with path.open("w") as handle:
        for i, n in enumerate(lengths):
            ids = [rng.randrange(3, VOCAB) for _ in range(n)]
            handle.write(json.dumps({"id": f"p{i}", "input_ids": ids}) + "\n")
    return path
