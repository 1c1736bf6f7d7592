"""A config-only model of the recipe's geometry: a Qwen3.8-27B-shaped hybrid target and a DFLASH drafter
for SGLang's `--load-format dummy` (issue 11). No weights are written: SGLang builds the modules and fills
them with random values on the GPU, which is all a timing needs (random weights accept no drafts, so the
measurement simulates acceptance, see lab/perf/run.py).

Qwen3.8-27B's config is not published; every number below says where it comes from.
- From this repository's kernel checks (what they assume the recipe model is):
  hidden 5120 and MLP intermediate 17408 (checks/gpu/smallm_plan.py: the upstream small-M route test's
  shapes); GDN 16 key heads and 48 value heads of 128, conv kernel 4 (checks/gpu/gdn_rig.py:
  `H, K, HV, V, WIDTH`); full attention 24 query heads, 4 KV heads of 256 with the output gate
  (checks/gpu/attn_harness.py, and smallm_plan.py's qkv_proj 14336 = 2*24*256 + 2*4*256).
- Assumptions (the repository assumes nothing here), each the published Qwen3.5/3.6-27B value:
  64 layers with every 4th full attention (docs/kernels.md already reasons with "16 full-attention layers
  of 64: an assumption"; the Qwen3.6-27B config.json has 48 linear + 16 full of 64); vocabulary 248320
  (transformers 5.24's `Qwen3_5TextConfig` default, written for checkpoint Qwen/Qwen3.5-27B); 262144
  positions (the recipe's `--context-length`).
- Drafter (its real config is not published either): hidden 5120 (it must equal the target's: the
  drafter reads the target's hidden states and borrows its embedding and LM head), 5 layers (z-lab's
  DFLASH drafters are 5-layer Qwen3 stacks: the card of guglxni/Qwen3.5-9B-abliterated-DFlash, a
  fine-tune of z-lab/Qwen3.5-9B-DFlash), attention and MLP of the target's full-attention layer geometry
  (as lab/card/tiny_model.py does for its drafter), block 8 (the recipe's
  `--speculative-num-draft-tokens 8`), context features from target layers 1, 16, 31, 46, 61 (what
  SGLang 0.5.20's `dflash_utils.build_target_layer_ids(64, 5)` picks when none are given).

Everything that is not geometry (class names, rope parameters, norms, special tokens, DFLASH keys) is
lab/card/tiny_model.py's, reused by import. The tokenizer is tiny_model's byte-level BPE, padded to the
vocabulary with tokens that no merge produces, so every id the random model emits decodes.

`memory()` estimates what SGLang 0.5.20 allocates at `--mem-fraction-static 0.88`, following its own
sizing (`mem_cache/kv_cache_configurator.py`: `_profile_available_bytes`, `_handle_max_mamba_cache`;
`configs/mamba_utils.py`: `mamba_cache_per_req`); lab/tests/test_perf_model.py checks the formula
against the pool sizes of the committed e2e server logs.

Usage (on the GPU host; here with --card SLUG):
    python -m lab.perf.model_27b OUT_DIR      # OUT_DIR/{target,drafter}/, OUT_DIR/perf-27b-model.json
    python -m lab.perf.model_27b --estimate   # prints the memory estimate only
The estimate sizes the pools from the free memory of the card it runs on (read through gpuhost, the
product's card reader), or of the card `--card SLUG` names (a CPU machine must name one).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from lab.card import tiny_model  # (lab/card/tiny_model.py: config, tokenizer and special-token writers)

HIDDEN = 5120
INTERMEDIATE = 17408
GDN_K_HEADS, GDN_V_HEADS, GDN_HEAD_DIM, CONV_KERNEL = 16, 48, 128, 4
ATTN_HEADS, KV_HEADS, ATTN_HEAD_DIM = 24, 4, 256
LAYERS, FULL_ATTENTION_INTERVAL = 64, 4
VOCAB = 248320
MAX_POSITIONS = 262144
DRAFT_LAYERS, BLOCK_SIZE = 5, 8
TARGET_LAYER_IDS = (1, 16, 31, 46, 61)

# The keys this module sets on tiny_model's configs; every other key is tiny_model's (a test holds this).
TARGET_GEOMETRY_KEYS = frozenset(
    {
        "vocab_size",
        "hidden_size",
        "intermediate_size",
        "num_hidden_layers",
        "layer_types",
        "num_attention_heads",
        "num_key_value_heads",
        "head_dim",
        "linear_num_key_heads",
        "linear_num_value_heads",
        "linear_key_head_dim",
        "linear_value_head_dim",
        "linear_conv_kernel_dim",
        "max_position_embeddings",
    }
)
DRAFTER_GEOMETRY_KEYS = frozenset(
    {
        "vocab_size",
        "hidden_size",
        "intermediate_size",
        "num_hidden_layers",
        "num_attention_heads",
        "num_key_value_heads",
        "head_dim",
        "max_position_embeddings",
        "block_size",
        "num_target_layers",
        "dflash_config",
    }
)


def padded_tokenizer_json(vocab_size: int = VOCAB) -> dict[str, Any]:
    """tiny_model's byte-level BPE with ids up to `vocab_size` - 1: the extra ids are strings of three
    byte symbols, which no merge builds (merges make pairs), so encoding never yields them and decoding
    maps each to three bytes."""
    spec, base = tiny_model.tokenizer_json()
    if vocab_size < base:
        raise ValueError(f"vocabulary {vocab_size} is smaller than tiny_model's tokenizer ({base} tokens)")
    vocab = spec["model"]["vocab"]
    symbols = tiny_model.byte_symbols()
    for n in range(vocab_size - base):
        token = symbols[n >> 16] + symbols[(n >> 8) & 0xFF] + symbols[n & 0xFF]
        vocab[token] = base + n
    return spec


def target_config(vocab_size: int = VOCAB, layers: int = LAYERS) -> dict[str, Any]:
    ids = tiny_model.token_ids(vocab_size)
    config = tiny_model.target_config(vocab_size, ids)
    config.update(
        hidden_size=HIDDEN,
        intermediate_size=INTERMEDIATE,
        num_hidden_layers=layers,
        layer_types=tiny_model.layer_types(layers, FULL_ATTENTION_INTERVAL),
        num_attention_heads=ATTN_HEADS,
        num_key_value_heads=KV_HEADS,
        head_dim=ATTN_HEAD_DIM,
        linear_num_key_heads=GDN_K_HEADS,
        linear_num_value_heads=GDN_V_HEADS,
        linear_key_head_dim=GDN_HEAD_DIM,
        linear_value_head_dim=GDN_HEAD_DIM,
        linear_conv_kernel_dim=CONV_KERNEL,
        max_position_embeddings=MAX_POSITIONS,
    )
    return config


def drafter_config(vocab_size: int = VOCAB, layers: int = LAYERS) -> dict[str, Any]:
    ids = tiny_model.token_ids(vocab_size)
    config = tiny_model.drafter_config(vocab_size, ids)
    dflash = dict(config["dflash_config"], block_size=BLOCK_SIZE, target_layer_ids=list(TARGET_LAYER_IDS))
    if layers != LAYERS:  # a shallower fallback shape: SGLang picks the layers (build_target_layer_ids)
        del dflash["target_layer_ids"]
    config.update(
        hidden_size=HIDDEN,
        intermediate_size=INTERMEDIATE,
        num_hidden_layers=DRAFT_LAYERS,
        num_attention_heads=ATTN_HEADS,
        num_key_value_heads=KV_HEADS,
        head_dim=ATTN_HEAD_DIM,
        max_position_embeddings=MAX_POSITIONS,
        block_size=BLOCK_SIZE,
        num_target_layers=layers,
        dflash_config=dflash,
    )
    return config


# ---- parameter counts (the tensors of the Hugging Face checkpoint layout tiny_model writes) ----


def _attention_params(cfg: dict[str, Any], gated: bool) -> int:
    h, heads, kv, dim = (
        cfg["hidden_size"],
        cfg["num_attention_heads"],
        cfg["num_key_value_heads"],
        cfg["head_dim"],
    )
    q_rows = (2 if gated else 1) * heads * dim  # the output gate doubles q_proj (tiny_model.target_weights)
    return q_rows * h + 2 * kv * dim * h + h * heads * dim + 2 * dim


def _gdn_params(cfg: dict[str, Any]) -> int:
    h = cfg["hidden_size"]
    key_dim = cfg["linear_num_key_heads"] * cfg["linear_key_head_dim"]
    value_dim = cfg["linear_num_value_heads"] * cfg["linear_value_head_dim"]
    conv_dim = 2 * key_dim + value_dim
    hv = cfg["linear_num_value_heads"]
    return (
        conv_dim * h  # in_proj_qkv
        + value_dim * h  # in_proj_z
        + 2 * hv * h  # in_proj_b, in_proj_a
        + conv_dim * cfg["linear_conv_kernel_dim"]  # conv1d
        + 2 * hv  # dt_bias, A_log
        + cfg["linear_value_head_dim"]  # norm
        + h * value_dim  # out_proj
    )


def _mlp_params(cfg: dict[str, Any]) -> int:
    return 3 * cfg["hidden_size"] * cfg["intermediate_size"]


def target_params(cfg: dict[str, Any]) -> int:
    h = cfg["hidden_size"]
    total = 2 * cfg["vocab_size"] * h + h  # embedding, untied LM head, final norm
    for kind in cfg["layer_types"]:
        mixer = _attention_params(cfg, gated=True) if kind == "full_attention" else _gdn_params(cfg)
        total += mixer + _mlp_params(cfg) + 2 * h
    return total


def drafter_params(cfg: dict[str, Any]) -> int:
    """The drafter's own tensors; its embedding and LM head are the target's."""
    h = cfg["hidden_size"]
    per_layer = _attention_params(cfg, gated=False) + _mlp_params(cfg) + 2 * h
    # Without explicit ids SGLang picks one target layer per draft layer (build_target_layer_ids).
    features = len(cfg["dflash_config"].get("target_layer_ids") or range(cfg["num_hidden_layers"]))
    return cfg["num_hidden_layers"] * per_layer + features * h * h + 2 * h  # + fc, hidden_norm, norm


# ---- SGLang 0.5.20's memory sizing ----

GIB = 1 << 30


@dataclass(frozen=True)
class Card:
    """What the estimate reads of a card: the memory SGLang saw free before loading weights, and NVML's
    total (data about that card, measured on it)."""

    avail_gib: float
    total_gib: float
    source: str


# Per card slug (docs/cards.md): the free memory SGLang logged alone on the card (`Load weight begin.
# avail mem=... GB`, GiB) and NVML's total.
CARDS = {
    "h200": Card(
        139.13, 143771 / 1024, "docs/evidence/e2e-h200-2026-11-30/patched/server-*.head.log; NVML 143771 MiB"
    ),
    "h100-sxm5-80gb": Card(
        78.50,
        81559 / 1024,
        "the first server alone on the lent H100, 2026-12-06 (the record step of "
        "docs/evidence/runner-h100-2026-12-06); NVML 81559 MiB",
    ),
}
DEFAULT_CARD = "h200"  # the recipe's measured card: memory()'s default, for the tests' pool checks


def running_card() -> str:
    """The card-table slug of this machine's card (gpuhost, the product's card reader). SystemExit with
    the fix where it cannot be read, names no card, or is a card CARDS has no free-memory figure for."""
    try:
        from gpuhost import CardIdentityError, local_card, slug_for
    except ImportError:
        raise SystemExit(
            "model_27b: gpuhost (the card reader, pip install ./pkgs/formats ./pkgs/gpuhost) is not "
            "importable here, so the "
            f"card cannot be read: name it with --card ({', '.join(sorted(CARDS))})"
        ) from None
    try:
        card = local_card()
    except CardIdentityError as error:
        raise SystemExit(f"model_27b: {error}") from None
    if card is None:
        raise SystemExit(
            f"model_27b: this machine has no NVIDIA card: name one with --card ({', '.join(sorted(CARDS))})"
        )
    slug = slug_for(card)
    if slug not in CARDS:
        raise SystemExit(
            f"model_27b: this machine's card is {slug}, for which CARDS holds no free-memory figure: add "
            "the 'Load weight begin. avail mem=' value SGLang logs alone on it, or name a card with --card"
        )
    return slug


@dataclass(frozen=True)
class Memory:
    target_params: int
    drafter_params: int
    weights_gib: float  # target + drafter weights and their rotary caches
    slack_gib: float  # avail * (1 - mem_fraction): never given to pools (graphs, activations)
    mamba_gib: float  # the GDN state pool: (max_running + 1) slots
    intermediate_gib: float  # per-draft-position states for verify (speculative servers only)
    kv_gib: float
    kv_bytes_per_token: int  # target + drafter; SGLang sizes both pools to the same token count
    kv_tokens: int
    context_len: int
    static_gib: float  # weights + pools = avail * mem_fraction, by SGLang's construction
    avail_gib: float
    max_running: int = 8

    @property
    def starts(self) -> bool:
        """SGLang refuses to start when nothing is left for KV (`rest_memory <= 0`)."""
        return self.kv_gib > 0

    @property
    def fits(self) -> bool:
        """It starts and its KV holds the recipe's whole context (262144 tokens); a shorter pool caps every
        request at the pool's length (the longest prompt that can be measured)."""
        return self.starts and self.kv_tokens >= self.context_len


def rotary_cache_bytes(cfg: dict[str, Any]) -> int:
    """SGLang's fp32 cos/sin cache over every position of the rotary part of the head."""
    factor = float(
        (cfg.get("rope_parameters") or {}).get("partial_rotary_factor", cfg.get("partial_rotary_factor", 1.0))
    )
    return cfg["max_position_embeddings"] * int(cfg["head_dim"] * factor) * 4


def mamba_bytes_per_request(cfg: dict[str, Any], ssm_bytes: int = 4, conv_bytes: int = 2) -> int:
    """`mamba_cache_per_req`: every GDN layer's conv window (conv_dim x (kernel - 1), model dtype) and
    recurrent state (HV x V x K, `--mamba-ssm-dtype float32`)."""
    key_dim = cfg["linear_num_key_heads"] * cfg["linear_key_head_dim"]
    conv_dim = 2 * key_dim + cfg["linear_num_value_heads"] * cfg["linear_value_head_dim"]
    conv = conv_dim * (cfg["linear_conv_kernel_dim"] - 1) * conv_bytes
    ssm = (
        cfg["linear_num_value_heads"] * cfg["linear_value_head_dim"] * cfg["linear_key_head_dim"] * ssm_bytes
    )
    return (conv + ssm) * cfg["layer_types"].count("linear_attention")


def kv_bytes_per_token(cfg: dict[str, Any], full_attention_layers: int) -> int:
    return full_attention_layers * cfg["num_key_value_heads"] * cfg["head_dim"] * 2 * 2  # K and V, bf16


def pools(
    target: dict[str, Any],
    drafter: dict[str, Any] | None,
    *,
    avail_gib: float,
    after_weights_gib: float,
    mem_fraction: float = 0.88,
    max_running: int = 8,
    draft_tokens: int = 8,
    context_len: int = MAX_POSITIONS,
) -> tuple[float, float, float, int, int]:
    """(mamba GiB, intermediate GiB, KV GiB, KV bytes per token, KV tokens) as SGLang 0.5.20 sizes them
    with `--disable-radix-cache` and `--max-running-requests` set: free memory after the weights, minus
    avail * (1 - mem_fraction), minus max_running + 1 state slots, minus (max_running + 1) * draft_tokens
    intermediate states when speculating; the rest is KV, the same token count for target and drafter."""
    per_req = mamba_bytes_per_request(target)
    mamba = (max_running + 1) * per_req / GIB
    intermediate = (max_running + 1) * draft_tokens * per_req / GIB if drafter is not None else 0.0
    per_token = kv_bytes_per_token(target, target["layer_types"].count("full_attention"))
    if drafter is not None:
        per_token += kv_bytes_per_token(drafter, drafter["num_hidden_layers"])
    kv = after_weights_gib - avail_gib * (1 - mem_fraction) - mamba - intermediate
    return mamba, intermediate, kv, per_token, int(kv * GIB // per_token)


def memory(
    target: dict[str, Any] | None = None,
    drafter: dict[str, Any] | None = None,
    *,
    speculative: bool = True,
    avail_gib: float = CARDS[DEFAULT_CARD].avail_gib,
    mem_fraction: float = 0.88,
    max_running: int = 8,
) -> Memory:
    target = target or target_config()
    drafter = (drafter or drafter_config()) if speculative else None
    t_params = target_params(target)
    d_params = drafter_params(drafter) if drafter else 0
    weights = 2 * (t_params + d_params) + rotary_cache_bytes(target)
    if drafter:
        weights += rotary_cache_bytes(drafter)
    weights_gib = weights / GIB
    mamba, intermediate, kv, per_token, tokens = pools(
        target,
        drafter,
        avail_gib=avail_gib,
        after_weights_gib=avail_gib - weights_gib,
        mem_fraction=mem_fraction,
        max_running=max_running,
    )
    return Memory(
        target_params=t_params,
        drafter_params=d_params,
        weights_gib=weights_gib,
        slack_gib=avail_gib * (1 - mem_fraction),
        mamba_gib=mamba,
        intermediate_gib=intermediate,
        kv_gib=kv,
        kv_bytes_per_token=per_token,
        kv_tokens=tokens,
        context_len=MAX_POSITIONS,
        static_gib=weights_gib + mamba + intermediate + kv,
        avail_gib=avail_gib,
        max_running=max_running,
    )


def memory_text(m: Memory, label: str, card: str = DEFAULT_CARD) -> str:
    return (
        f"{label}: target {m.target_params / 1e9:.2f}B + drafter {m.drafter_params / 1e9:.2f}B params; "
        f"weights {m.weights_gib:.1f} GiB, GDN state {m.mamba_gib:.2f} GiB, verify states "
        f"{m.intermediate_gib:.2f} GiB, KV {m.kv_gib:.1f} GiB = {m.kv_tokens} tokens "
        f"({m.kv_bytes_per_token} B/token; context {m.context_len}); static {m.static_gib:.1f} GiB + slack "
        f"{m.slack_gib:.1f} GiB of {m.avail_gib:.2f} GiB free ({CARDS[card].total_gib:.1f} GiB {card}), "
        f"{m.max_running} running requests: {verdict(m)}"
    )


def verdict(m: Memory) -> str:
    if m.fits:
        return "fits"
    if m.starts:
        return f"starts, but no request can exceed {m.kv_tokens} tokens (the context is {m.context_len})"
    return "DOES NOT FIT (nothing left for KV: SGLang refuses to start)"


def write(out: Path, layers: int = LAYERS) -> dict[str, Any]:
    target, drafter = target_config(layers=layers), drafter_config(layers=layers)
    spec = padded_tokenizer_json()
    for name, config in (("target", target), ("drafter", drafter)):
        folder = out / name
        folder.mkdir(parents=True, exist_ok=True)
        tiny_model.write_tokenizer(folder, spec)
        (folder / "config.json").write_text(json.dumps(config, indent=1) + "\n")
    summary = {
        "out": str(out),
        "layers": layers,
        "vocab_size": VOCAB,
        "memory": {
            "spec": asdict(memory(target, drafter, speculative=True)),
            "no-spec": asdict(memory(target, drafter, speculative=False)),
        },
    }
    (out / "perf-27b-model.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, nargs="?", help="folder for target/ and drafter/")
    parser.add_argument("--estimate", action="store_true", help="print the memory estimate only")
    parser.add_argument(
        "--card",
        choices=sorted(CARDS),
        help="the card whose free memory the estimate sizes the pools from (default: this machine's card)",
    )
    parser.add_argument(
        "--max-running-requests",
        dest="max_running",
        type=int,
        default=8,
        help="request slots, as the server's flag (default 8, the recipe's): fewer leave KV more room",
    )
    parser.add_argument(
        "--layers",
        type=int,
        default=LAYERS,
        help=f"decoder layers (default {LAYERS}); fewer only as the fallback when {LAYERS} do not start",
    )
    args = parser.parse_args(argv)
    if not args.estimate and args.out is None:
        parser.error("give OUT_DIR, or --estimate")
    if not 4 <= args.layers <= LAYERS or args.layers % FULL_ATTENTION_INTERVAL:
        parser.error(
            f"--layers {args.layers}: give a multiple of {FULL_ATTENTION_INTERVAL} from 4 to {LAYERS}"
        )
    target, drafter = target_config(layers=args.layers), drafter_config(layers=args.layers)
    slug = args.card or running_card()
    card = CARDS[slug]
    for speculative, label in ((True, "speculative servers"), (False, "exact no-spec server")):
        m = memory(
            target, drafter, speculative=speculative, avail_gib=card.avail_gib, max_running=args.max_running
        )
        print(memory_text(m, label, slug))
        if not m.starts:
            print(f"model_27b: the estimate says this shape does not fit the {slug}", file=sys.stderr)
            return 1
    if args.out is not None:
        write(args.out, args.layers)
        print(f"wrote {args.out / 'target'} and {args.out / 'drafter'} (config and tokenizer, no weights)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
