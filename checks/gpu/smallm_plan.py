"""What the small-M sweep measures: the (N, K) shapes and the candidate configs (pure data, no torch).

Shapes. Qwen3.8-27B's projections as this repository's kernel checks assume its geometry (tensor parallel 1,
bf16, nn.Linear weights [N, K], fused as SGLang 0.5.20's `models/qwen3_5.py` fuses them):
- hidden 5120 and MLP intermediate 17408: the public upstream test of the route (its shapes (5120, 17408) and
  (5120, 6144), kept in checks/gpu/test_smallm_route.py);
- full attention, 24 query heads and 4 KV heads of 256 (checks/gpu/attn_harness.py), with the output gate
  that `qwen3_5.py` folds into `qkv_proj` (`total_num_heads * (1 + attn_output_gate)`): qkv 2*24*256 + 2*4*256
  = 14336 (the upstream test's (14336, 5120)), o_proj K = 24*256 = 6144;
- GDN, 16 key heads and 48 value heads of 128 (checks/gpu/gdn_rig.py): in_proj_qkvz 2*16*128 +
  2*48*128 = 16384, in_proj_ba 2*48 = 96 (the upstream test's (96, 5120)), out_proj K = 48*128 = 6144;
- MLP gate_up 2*17408 = 34816 (MergedColumnParallelLinear), down (5120, 17408).
The lm_head (vocabulary x 5120) is left out: the repository assumes no vocabulary size for this model.
The remaining shapes fill 4 MB..300 MB and probe the tile rule: the same projections unfused (which SGLang
does not do for this model at TP 1, but other layers and drafters have such widths), and the three shapes of
the H200 measurement that opened issue 12 (Qwen2-7B-like (3584, 18944), (18944, 3584) and (8192, 8192)).

Candidates. Each is a config of the patched route's own `small_m_matmul(config=...)`, so what is measured is
what ships. All of them split over N only and keep K ascending in one accumulator. Every candidate needs at
most ~96 KB of shared memory per program (small_m_tiles.shared_bytes), so it also launches on SM120 (99 KB
per block); the H200 would allow more.
"""

from __future__ import annotations

# (N, K, where it comes from)
SHAPES: list[tuple[int, int, str]] = [
    (96, 5120, "GDN in_proj_ba (2 x 48 value heads)"),
    (512, 5120, "narrow projection (range floor, ~5 MB)"),
    (1024, 5120, "narrow projection"),
    (2048, 5120, "attention k+v unfused (2 x 4 x 256)"),
    (4096, 5120, "GDN q+k unfused (2 x 16 x 128)"),
    (5120, 6144, "attention o_proj / GDN out_proj"),
    (6144, 5120, "GDN v or z unfused (48 x 128)"),
    (12288, 5120, "attention q with gate unfused (2 x 24 x 256)"),
    (14336, 5120, "attention qkv_proj with output gate"),
    (16384, 5120, "GDN in_proj_qkvz"),
    (5120, 17408, "MLP down_proj"),
    (17408, 5120, "MLP gate or up unfused"),
    (34816, 5120, "MLP gate_up_proj"),
    (3584, 18944, "issue 12 probe (Qwen2-7B down)"),
    (18944, 3584, "issue 12 probe (Qwen2-7B gate/up)"),
    (8192, 8192, "issue 12 probe"),
]

PROGRAMS_PER_SM = (0, 1, 2, 4)  # 0: one program per tile; otherwise persistent, min(tiles, this x SMs)


def _cfg(load: str, block_n: int, block_k: int, warps: int, stages: int, flatten: bool = False) -> dict:
    return {
        "LOAD": load,
        "BLOCK_N": block_n,
        "BLOCK_K": block_k,
        "num_warps": warps,
        "num_stages": stages,
        "FLATTEN": flatten,
    }


# Kernels (one Triton compile each); every one is launched with each PROGRAMS_PER_SM (FLATTEN ones only
# persistent: with one program per tile there is nothing to flatten).
KERNELS: list[dict] = [
    _cfg("kn", 16, 256, 4, 4),  # the first route's three tiles
    _cfg("kn", 32, 256, 4, 4),
    _cfg("kn", 64, 128, 4, 4),
    _cfg("kn", 16, 512, 4, 4),
    _cfg("kn", 32, 512, 4, 3),
    _cfg("nk", 16, 256, 4, 6),
    _cfg("nk", 16, 512, 4, 4),
    _cfg("nk", 32, 256, 4, 4),
    _cfg("nk", 64, 128, 4, 5),
    _cfg("nk", 64, 256, 8, 3),
    _cfg("tma", 16, 128, 4, 8),
    _cfg("tma", 16, 256, 4, 4),
    _cfg("tma", 16, 256, 4, 6),
    _cfg("tma", 16, 256, 2, 6),
    _cfg("tma", 32, 128, 4, 8),
    _cfg("tma", 32, 256, 4, 4),
    _cfg("tma", 32, 256, 4, 5),
    _cfg("tma", 64, 64, 4, 8),
    _cfg("tma", 64, 128, 4, 5),
    _cfg("tma", 64, 256, 4, 3),
    _cfg("tma", 128, 128, 4, 3),
    _cfg("tma", 16, 256, 4, 6, flatten=True),
    _cfg("tma", 32, 128, 4, 8, flatten=True),
    _cfg("nk", 16, 256, 4, 6, flatten=True),
]


def kernel_id(config: dict) -> str:
    """A short stable name: load, tile, K block, warps, stages (+f when flattened)."""
    tile = f"n{config['BLOCK_N']}-k{config['BLOCK_K']}-w{config['num_warps']}-s{config['num_stages']}"
    return f"{config['LOAD']}-{tile}" + ("-f" if config.get("FLATTEN") else "")


def candidate_id(config: dict) -> str:
    per_sm = config["PROGRAMS_PER_SM"]
    return f"{kernel_id(config)}-{'tiles' if per_sm == 0 else f'p{per_sm}'}"


def candidates() -> dict[str, dict]:
    """Every candidate config by id (kernel x programs per SM)."""
    found: dict[str, dict] = {}
    for kernel in KERNELS:
        for per_sm in PROGRAMS_PER_SM:
            if kernel["FLATTEN"] and per_sm == 0:
                continue
            config = {**kernel, "PROGRAMS_PER_SM": per_sm}
            found[candidate_id(config)] = config
    return found
