"""Launch plans of patch 0003's rows kernels that the kernel bench times (lab/kernels/
bench_attn_verify.py) and the GPU checks prove (test_attn_exact_verify.py): each a tuple of the
patch's module constants, named below, the first of each list the constants as the patch ships them
(cards without an entry of their own run them), and each card's entry in the patch's _CARD_PLANS among
them (checks/offline/test_bench_attn_plans.py holds both against the patch). Test and bench code only."""

TILE_NAMES = ("_TILE_ROWS", "_TILE_WARPS", "_TARGET_PROGRAMS", "_SMALL_TILE_WARPS", "_TILE_LOOP_STAGES")
DRAFT_NAMES = ("_DRAFT_FREE", "_DRAFT_SPLIT_TOKENS", "_DRAFT_BLOCK_N", "_DRAFT_WARPS", "_DRAFT_TILE_MAX")

# verify tile plans (_TILE_ROWS, _TILE_WARPS, _TARGET_PROGRAMS, _SMALL_TILE_WARPS, _TILE_LOOP_STAGES of
# patch 0003); the first is the constants' (the H200's own plan, 32 rows with 4 warps and the tile loop at
# 3 stages, is the last; the one before it is the H200's plan of 2026-12-02). 16 rows: two draft rows of
# six heads in decode's own 16-row tile, with 4 warps (the lead; ptxas spills 120 bytes a thread there)
# or 8 (no spill: lab/kernels/ptx_resources.py), more programs. The tile loop's stages (None: Triton's
# default, no async copy) apply to decode's rows too.
TILE_PLANS = [
    (32, 8, 4096, 4, None), (16, 8, 4096, 4, None), (16, 8, 4096, 8, None), (16, 8, 16384, 8, None),
    (32, 8, 16384, 4, None), (32, 4, 4096, 4, None), (32, 4, 4096, 4, 3),
]  # fmt: skip
# the drafter's free plan (_DRAFT_FREE, _DRAFT_SPLIT_TOKENS, _DRAFT_BLOCK_N, _DRAFT_WARPS,
# _DRAFT_TILE_MAX of patch 0003); the first is the constants' (off: the verify rows' plan); the H200's own
# is the free plan with 64-token KV tiles and a 64-row tile (which spills, yet ran fastest there).
DRAFT_PLANS = [
    (False, 1024, 32, 8, 32), (True, 1024, 32, 8, 32), (True, 2048, 32, 8, 32), (True, 512, 32, 8, 32),
    (True, 4096, 32, 8, 32), (True, 1024, 64, 8, 32), (True, 1024, 32, 8, 64), (True, 1024, 64, 8, 64),
    (True, 1024, 64, 16, 64),
]  # fmt: skip
