"""A tiny model of the recipe's family, as data: a hybrid Qwen3.5 text target and a DFLASH drafter.

Writes two Hugging Face model folders (config.json, model.safetensors, tokenizer) that SGLang 0.5.20
serves with the recipe's argv, only the model paths changed:

- target: `Qwen3_5ForCausalLM` (model_type `qwen3_5_text`), the text-only class of SGLang's Qwen3.5
  family (`sglang/srt/models/qwen3_5_text.py`, registered in its EntryClass). The recipe's Qwen3.8-27B
  is a hybrid of Gated DeltaNet (linear attention) layers and full-attention layers; this class is the
  one SGLang builds that hybrid with (the `ForConditionalGeneration` classes add a vision tower a
  token-id test does not need). 8 layers, every 4th full attention (`full_attention_interval`), GDN
  with 4 key / 12 value heads of 128 (the recipe's 16 / 48 ratio), attention 6 query / 1 KV heads of
  256 with the output gate (the recipe's 24 / 4 ratio, head_dim 256), `max_position_embeddings`
  262144 so that `--context-length 262144` stands unchanged.
- drafter: `DFlashDraftModel` (`sglang/srt/models/dflash.py`), 2 layers, block size 8 (the recipe's
  `--speculative-num-draft-tokens 8`), context features from target layers 1 and 5. It borrows the
  target's embedding and LM head, as DFLASH drafts do.

Weights are random (fixed seed) except for a constructed part that makes drafts often right, so the
recipe battery exercises accepted rows, partial acceptance and rollback (a random drafter accepts
nothing and forced-reject would collapse into the recipe battery):
- every token's embedding holds the constant `EMBED_D0` in dimension 0;
- the LM head's row `TOKEN_X` has `HEAD_D0` in dimension 0, row `TOKEN_Z` `HEAD_D0 - DELTA_D0`, every
  other row 0 there; all other dimensions random;
- the drafter writes nothing into dimension 0 (zero rows in its o_proj and down_proj) and its final
  norm keeps only dimension 0, so every draft is TOKEN_X;
- the target's hidden state is random in the other dimensions, so its greedy choice is TOKEN_X, or
  TOKEN_Z where the context tips the small margin DELTA_D0: drafts are accepted up to the first Z.
Every logprob still depends on every bit of the hidden state (all other rows of the head are random),
so a verify kernel that computes differently shows up in the logprobs.

The tokenizer is byte-level BPE built here (256 byte symbols, merges of letter pairs), with exactly
as many tokens as the model's vocabulary, so every id the model emits decodes.

Standard library, torch and safetensors only (runs on the GPU host as is). Usage:
    python -m lab.card.tiny_model OUT_DIR      # writes OUT_DIR/target and OUT_DIR/drafter
"""

from __future__ import annotations

import argparse
import hashlib
import json
import string
import sys
from pathlib import Path

import torch
from safetensors.torch import save_file

SEED = 20261130
HIDDEN = 1024
LAYERS = 8
FULL_ATTENTION_INTERVAL = 4
INTERMEDIATE = 3072
GDN_K_HEADS, GDN_V_HEADS, GDN_HEAD_DIM, CONV_KERNEL = 4, 12, 128, 4
ATTN_HEADS, KV_HEADS, ATTN_HEAD_DIM = 6, 1, 256
DRAFT_LAYERS, BLOCK_SIZE, TARGET_LAYER_IDS = 2, 8, (1, 5)
MAX_POSITIONS = 262144
INIT_STD = 0.02
CONV_STD = 0.3
NORM_STD = 0.05
EMBED_D0, HEAD_D0, DELTA_D0 = 16.0, 1.0, 0.004
SPECIALS = ("<|endoftext|>", "<|MASK|>")


def byte_symbols() -> list[str]:
    """GPT-2's printable stand-in for each byte (what ByteLevel pre-tokenization produces)."""
    visible = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    table = {b: chr(b) for b in visible}
    extra = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + extra)
            extra += 1
    return [table[b] for b in range(256)]


def tokenizer_json() -> tuple[dict, int]:
    """A byte-level BPE tokenizer.json and its size (the model's vocab_size)."""
    symbols = byte_symbols()
    vocab = {s: i for i, s in enumerate(symbols)}
    space = symbols[ord(" ")]
    letters = [symbols[ord(c)] for c in string.ascii_lowercase + string.ascii_uppercase]
    merges = []
    for first in [space, *letters]:
        for second in letters:
            merges.append([first, second])
    for pair in merges:
        vocab["".join(pair)] = len(vocab)
    added = []
    for special in SPECIALS:
        added.append(
            {
                "id": len(vocab),
                "content": special,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": True,
            }
        )
        vocab[special] = len(vocab)
    spec = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {
            "type": "ByteLevel",
            "add_prefix_space": False,
            "trim_offsets": True,
            "use_regex": True,
        },
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": vocab,
            "merges": merges,
        },
    }
    return spec, len(vocab)


def write_tokenizer(folder: Path, spec: dict | None = None) -> int:
    """tokenizer.json (`spec`, default this module's) and tokenizer_config.json; the vocabulary size."""
    spec, size = (spec, len(spec["model"]["vocab"])) if spec else tokenizer_json()
    (folder / "tokenizer.json").write_text(json.dumps(spec, ensure_ascii=False))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "eos_token": SPECIALS[0],
        "pad_token": SPECIALS[0],
        "mask_token": SPECIALS[1],
        "model_max_length": MAX_POSITIONS,
        "clean_up_tokenization_spaces": False,
    }
    (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=1))
    return size


def token_ids(vocab_size: int) -> dict[str, int]:
    """The constructed tokens: X and Z are two letter pairs (" t", " a"), the specials sit at the end."""
    spec, _ = tokenizer_json()
    vocab = spec["model"]["vocab"]
    sym = byte_symbols()
    return {
        "x": vocab[sym[ord(" ")] + sym[ord("t")]],
        "z": vocab[sym[ord(" ")] + sym[ord("a")]],
        "eos": vocab[SPECIALS[0]],
        "mask": vocab[SPECIALS[1]],
        "vocab_size": vocab_size,
    }


class Init:
    """Seeded draws on the CPU (the same bits on every machine), stored as bf16."""

    def __init__(self, seed: int) -> None:
        self.gen = torch.Generator(device="cpu").manual_seed(seed)

    def normal(self, *shape: int, std: float = INIT_STD, mean: float = 0.0) -> torch.Tensor:
        return (torch.randn(shape, generator=self.gen) * std + mean).to(torch.bfloat16)

    def uniform(self, *shape: int, low: float, high: float) -> torch.Tensor:
        return (torch.rand(shape, generator=self.gen) * (high - low) + low).to(torch.bfloat16)


def layer_types(layers: int = LAYERS, interval: int = FULL_ATTENTION_INTERVAL) -> list[str]:
    """Every `interval`-th layer full attention, the others Gated DeltaNet."""
    return ["full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(layers)]


def target_config(vocab_size: int, ids: dict[str, int]) -> dict:
    return {
        "architectures": ["Qwen3_5ForCausalLM"],
        "model_type": "qwen3_5_text",
        "dtype": "bfloat16",
        "torch_dtype": "bfloat16",
        "vocab_size": vocab_size,
        "hidden_size": HIDDEN,
        "intermediate_size": INTERMEDIATE,
        "num_hidden_layers": LAYERS,
        "layer_types": layer_types(),
        "full_attention_interval": FULL_ATTENTION_INTERVAL,
        "num_attention_heads": ATTN_HEADS,
        "num_key_value_heads": KV_HEADS,
        "head_dim": ATTN_HEAD_DIM,
        "attn_output_gate": True,
        "linear_num_key_heads": GDN_K_HEADS,
        "linear_num_value_heads": GDN_V_HEADS,
        "linear_key_head_dim": GDN_HEAD_DIM,
        "linear_value_head_dim": GDN_HEAD_DIM,
        "linear_conv_kernel_dim": CONV_KERNEL,
        "hidden_act": "silu",
        "rms_norm_eps": 1e-6,
        "max_position_embeddings": MAX_POSITIONS,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25},
        "tie_word_embeddings": False,
        "eos_token_id": ids["eos"],
        "bos_token_id": None,
        "pad_token_id": ids["eos"],
    }


def target_weights(init: Init, ids: dict[str, int]) -> dict[str, torch.Tensor]:
    vocab = ids["vocab_size"]
    w: dict[str, torch.Tensor] = {}
    embed = init.normal(vocab, HIDDEN, std=1.0).float()
    embed[:, 0] = EMBED_D0
    w["model.embed_tokens.weight"] = embed.to(torch.bfloat16)
    key_dim, value_dim = GDN_K_HEADS * GDN_HEAD_DIM, GDN_V_HEADS * GDN_HEAD_DIM
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        if (i + 1) % FULL_ATTENTION_INTERVAL == 0:
            w[p + "self_attn.q_proj.weight"] = init.normal(2 * ATTN_HEADS * ATTN_HEAD_DIM, HIDDEN)
            w[p + "self_attn.k_proj.weight"] = init.normal(KV_HEADS * ATTN_HEAD_DIM, HIDDEN)
            w[p + "self_attn.v_proj.weight"] = init.normal(KV_HEADS * ATTN_HEAD_DIM, HIDDEN)
            w[p + "self_attn.o_proj.weight"] = init.normal(HIDDEN, ATTN_HEADS * ATTN_HEAD_DIM)
            w[p + "self_attn.q_norm.weight"] = init.normal(ATTN_HEAD_DIM, std=NORM_STD)
            w[p + "self_attn.k_norm.weight"] = init.normal(ATTN_HEAD_DIM, std=NORM_STD)
        else:
            w[p + "linear_attn.in_proj_qkv.weight"] = init.normal(2 * key_dim + value_dim, HIDDEN)
            w[p + "linear_attn.in_proj_z.weight"] = init.normal(value_dim, HIDDEN)
            w[p + "linear_attn.in_proj_b.weight"] = init.normal(GDN_V_HEADS, HIDDEN)
            w[p + "linear_attn.in_proj_a.weight"] = init.normal(GDN_V_HEADS, HIDDEN)
            w[p + "linear_attn.conv1d.weight"] = init.normal(
                2 * key_dim + value_dim, 1, CONV_KERNEL, std=CONV_STD
            )
            w[p + "linear_attn.dt_bias"] = init.normal(GDN_V_HEADS, std=0.5)
            w[p + "linear_attn.A_log"] = init.uniform(GDN_V_HEADS, low=0.0, high=2.7)
            w[p + "linear_attn.norm.weight"] = init.normal(GDN_HEAD_DIM, std=NORM_STD, mean=1.0)
            w[p + "linear_attn.out_proj.weight"] = init.normal(HIDDEN, value_dim)
        w[p + "mlp.gate_proj.weight"] = init.normal(INTERMEDIATE, HIDDEN)
        w[p + "mlp.up_proj.weight"] = init.normal(INTERMEDIATE, HIDDEN)
        w[p + "mlp.down_proj.weight"] = init.normal(HIDDEN, INTERMEDIATE)
        w[p + "input_layernorm.weight"] = init.normal(HIDDEN, std=NORM_STD)
        w[p + "post_attention_layernorm.weight"] = init.normal(HIDDEN, std=NORM_STD)
    w["model.norm.weight"] = init.normal(HIDDEN, std=NORM_STD)
    head = init.normal(vocab, HIDDEN).float()
    head[:, 0] = 0.0
    head[ids["x"], 0] = HEAD_D0
    head[ids["z"], 0] = HEAD_D0 - DELTA_D0
    w["lm_head.weight"] = head.to(torch.bfloat16)
    return w


def drafter_config(vocab_size: int, ids: dict[str, int]) -> dict:
    return {
        "architectures": ["DFlashDraftModel"],
        "model_type": "qwen3",
        "dtype": "bfloat16",
        "torch_dtype": "bfloat16",
        "vocab_size": vocab_size,
        "hidden_size": HIDDEN,
        "intermediate_size": INTERMEDIATE,
        "num_hidden_layers": DRAFT_LAYERS,
        "num_attention_heads": ATTN_HEADS,
        "num_key_value_heads": KV_HEADS,
        "head_dim": ATTN_HEAD_DIM,
        "hidden_act": "silu",
        "rms_norm_eps": 1e-6,
        "max_position_embeddings": MAX_POSITIONS,
        "rope_theta": 10000000.0,
        "tie_word_embeddings": False,
        "block_size": BLOCK_SIZE,
        "num_target_layers": LAYERS,
        "dflash_config": {
            "block_size": BLOCK_SIZE,
            "target_layer_ids": list(TARGET_LAYER_IDS),
            "mask_token": SPECIALS[1],
            "mask_token_id": ids["mask"],
        },
        "eos_token_id": ids["eos"],
    }


def drafter_weights(init: Init) -> dict[str, torch.Tensor]:
    w: dict[str, torch.Tensor] = {}
    for i in range(DRAFT_LAYERS):
        p = f"layers.{i}."
        o_proj = init.normal(HIDDEN, ATTN_HEADS * ATTN_HEAD_DIM).float()
        down = init.normal(HIDDEN, INTERMEDIATE).float()
        o_proj[0] = 0.0  # nothing is written into dimension 0: it stays the embedding's EMBED_D0 > 0
        down[0] = 0.0
        w[p + "self_attn.q_proj.weight"] = init.normal(ATTN_HEADS * ATTN_HEAD_DIM, HIDDEN)
        w[p + "self_attn.k_proj.weight"] = init.normal(KV_HEADS * ATTN_HEAD_DIM, HIDDEN)
        w[p + "self_attn.v_proj.weight"] = init.normal(KV_HEADS * ATTN_HEAD_DIM, HIDDEN)
        w[p + "self_attn.o_proj.weight"] = o_proj.to(torch.bfloat16)
        w[p + "self_attn.q_norm.weight"] = init.normal(ATTN_HEAD_DIM, std=NORM_STD, mean=1.0)
        w[p + "self_attn.k_norm.weight"] = init.normal(ATTN_HEAD_DIM, std=NORM_STD, mean=1.0)
        w[p + "mlp.gate_proj.weight"] = init.normal(INTERMEDIATE, HIDDEN)
        w[p + "mlp.up_proj.weight"] = init.normal(INTERMEDIATE, HIDDEN)
        w[p + "mlp.down_proj.weight"] = down.to(torch.bfloat16)
        w[p + "input_layernorm.weight"] = init.normal(HIDDEN, std=NORM_STD, mean=1.0)
        w[p + "post_attention_layernorm.weight"] = init.normal(HIDDEN, std=NORM_STD, mean=1.0)
    w["fc.weight"] = init.normal(HIDDEN, len(TARGET_LAYER_IDS) * HIDDEN)
    w["hidden_norm.weight"] = init.normal(HIDDEN, std=NORM_STD, mean=1.0)
    final = torch.zeros(HIDDEN)
    final[0] = 1.0  # the draft's output is dimension 0 alone: the head then favours TOKEN_X
    w["norm.weight"] = final.to(torch.bfloat16)
    return w


def write_model(folder: Path, config: dict, weights: dict[str, torch.Tensor]) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    write_tokenizer(folder)
    (folder / "config.json").write_text(json.dumps(config, indent=1) + "\n")
    save_file({k: v.contiguous() for k, v in sorted(weights.items())}, str(folder / "model.safetensors"))
    return hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest()


def build(out: Path) -> dict:
    _, vocab_size = tokenizer_json()
    ids = token_ids(vocab_size)
    init = Init(SEED)
    digests = {
        "target": write_model(out / "target", target_config(vocab_size, ids), target_weights(init, ids)),
        "drafter": write_model(out / "drafter", drafter_config(vocab_size, ids), drafter_weights(init)),
    }
    summary = {"out": str(out), "ids": ids, "model.safetensors sha256": digests}
    (out / "tiny-model.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="folder for target/ and drafter/")
    args = parser.parse_args(argv)
    print(json.dumps(build(args.out), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
