"""Patch 0003's shared-rows kernels against SGLang's own decode kernels, on a CPU under Triton's interpreter.

Usage: TRITON_INTERPRET=1 python -m checkhelpers.attn_rows_interpret --decode DECODE_ATTENTION_PY --patch
0003.patch --work DIR. The decode kernels (`_fwd_grouped_kernel_stage1`, `_fwd_kernel_stage2`, `tanh`) come
from the released wheel's decode_attention.py, the rows kernels from the patch, each written into a module of
its own under DIR (Triton's JIT reads a kernel's source from its file). For every case the verify batch is
laid out as the patch lays it out (one KV stream per request, row lengths) and as decode's CSR rows, and:
- every non-empty (row, split) partial of `_shared_rows_stage1` equals decode's stage 1 run on that row,
  within 1e-6 relative (the interpreter's sums are numpy's, not the MMA's: bits are the H200's job);
- every empty split stays as poisoned (NaN): nothing is written where decode writes nothing;
- `_rows_stage2` merges to decode's `_fwd_kernel_stage2` output within 1e-6.
Cases cover causal verify rows, the drafter's non-causal block (also under the free draft plan: 64-token KV
tiles, one program for the block, any row-sum order), decode rows (lengths from the offsets),
rows of one request with different split sizes (below 1793 tokens), several split programs per row, and
two GQA geometries. Prints one line per case and `N cases, F failures`; exits 1 on a failure.
"""

from __future__ import annotations

import argparse
import ast
import math
from pathlib import Path

import torch

from checkhelpers import generated_modules

DECODE_KERNELS = ("tanh", "_fwd_grouped_kernel_stage1", "_fwd_kernel_stage2")
ROWS_KERNELS = ("_row_sum_decode_order", "_shared_rows_stage1", "_rows_stage2")
ROWS_HELPERS = ("tile_plan", "draft_plan", "_split_programs")
ROWS_CONSTANTS = (
    "_TARGET_PROGRAMS",
    "_TILE_ROWS",
    "_BLOCK_N",
    "_MERGE_CHUNK",
    "_DRAFT_BLOCK_N",
    "_DRAFT_TILE_MAX",
    "_DRAFT_SPLIT_TOKENS",
)
HEADER = "import math\nfrom typing import Any, Optional\n\nimport triton\nimport triton.language as tl\n"
MAX_SPLITS = 16  # a 4096-token context at SGLang's split tile of 256
SPLIT_TILE = 256


def new_file_from_patch(patch_text: str, path: str) -> str:
    import smallm_table

    return smallm_table.new_file_from_patch(patch_text, path)


def pick(
    source: str, functions: tuple[str, ...], jit: tuple[str, ...], constants: tuple[str, ...] = ()
) -> str:
    """The named top-level definitions of `source`, the kernels re-decorated with @triton.jit."""
    module = ast.parse(source)
    parts = []
    for node in module.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) in constants for t in node.targets):
            parts.append(ast.get_source_segment(source, node) or "")
        if isinstance(node, ast.FunctionDef) and node.name in functions:
            text = ast.get_source_segment(source, node) or ""
            parts.append(("@triton.jit\n" if node.name in jit else "") + text)
    missing = set(functions) - {n.name for n in module.body if isinstance(n, ast.FunctionDef)}
    if missing:
        raise SystemExit(f"definitions missing from the source: {sorted(missing)}")
    return "\n\n\n".join(parts) + "\n"


def write_modules(decode_py: Path, patch: Path, work: Path) -> tuple[object, object]:
    work.mkdir(parents=True, exist_ok=True)
    decode_src = decode_py.read_text()
    (work / "bx_decode_kernels.py").write_text(HEADER + pick(decode_src, DECODE_KERNELS, DECODE_KERNELS))
    rows_src = new_file_from_patch(
        patch.read_text(), "python/sglang/srt/layers/attention/exact_verify_attention.py"
    )
    rows = HEADER + "from bx_decode_kernels import tanh\n_GROUPED_BLOCK_H = 16\n_MIN_BLOCK_KV = 32\n"
    rows += pick(rows_src, ROWS_KERNELS + ROWS_HELPERS, ROWS_KERNELS, ROWS_CONSTANTS)
    (work / "bx_rows_kernels.py").write_text(rows)
    return generated_modules.load(work / "bx_decode_kernels.py"), generated_modules.load(
        work / "bx_rows_kernels.py"
    )


def run_case(decode, rows, geometry, prefixes, width, layout, programs, seed) -> str | None:  # noqa: ANN001
    """None when the rows kernels match decode on this case, else what differs."""
    heads, kv_heads, dim = geometry
    group = heads // kv_heads
    gen = torch.Generator().manual_seed(seed)
    bs = len(prefixes)
    total = sum(prefixes) + bs * width + 1
    k_buf = torch.randn((total, kv_heads, dim), generator=gen).to(torch.bfloat16)
    v_buf = torch.randn((total, kv_heads, dim), generator=gen).to(torch.bfloat16)
    perm = torch.randperm(total - 1, generator=gen) + 1
    streams, start = [], 0
    for p in prefixes:
        streams.append(perm[start : start + p + width])
        start += p + width
    if layout == "causal":
        lens = [p + j + 1 for p in prefixes for j in range(width)]
    else:  # the drafter's block (also under the free draft plan), or decode rows (width 1)
        lens = [p + width for p in prefixes for _ in range(width)]
    lens_t = torch.tensor(lens, dtype=torch.int32)
    free = layout.startswith("block-free")
    # decode's split rule, or the free draft plan's fixed splits (draft_split_counts): decode's kernel is
    # then given the same split counts, so the two are compared split by split
    split_tile = rows._DRAFT_SPLIT_TOKENS if free else SPLIT_TILE
    splits = ((lens_t + split_tile - 1) // split_tile).clamp(1, MAX_SPLITS)
    n_rows = bs * width
    q = torch.randn((n_rows, heads, dim), generator=gen).to(torch.bfloat16)
    scale = dim**-0.5
    # decode's layout: one CSR row per row
    row_indptr = torch.zeros(n_rows + 1, dtype=torch.int32)
    row_indptr[1:] = torch.cumsum(lens_t, 0)
    row_indices = torch.cat([streams[r // width][: lens[r]] for r in range(n_rows)]).to(torch.int64)
    # the patch's layout: one stream per request, or decode's own CSR when lengths come from it
    from_indptr = layout == "decode"
    if from_indptr:
        req_indptr, kv_indices = row_indptr, row_indices
    else:
        req_indptr = torch.zeros(bs + 1, dtype=torch.int32)
        req_indptr[1:] = torch.cumsum(torch.tensor([p + width for p in prefixes]), 0)
        kv_indices = torch.cat(streams).to(torch.int64)
    want_o = torch.full((n_rows, heads, MAX_SPLITS, dim), float("nan"))
    want_l = torch.full((n_rows, heads, MAX_SPLITS), float("nan"))
    got_o, got_l = want_o.clone(), want_l.clone()
    tiles = math.ceil(heads / min(16, group))  # decode's _grouped_head_tiles
    decode._fwd_grouped_kernel_stage1[(n_rows, tiles, MAX_SPLITS)](
        q, k_buf, v_buf, scale, row_indptr, row_indices, want_o, want_l, splits,
        q.stride(0), q.stride(1), k_buf.stride(0), k_buf.stride(1), v_buf.stride(0), v_buf.stride(1),
        0, 0, 0, 0, want_o.stride(0), want_o.stride(1), want_o.stride(2),
        kv_group_num=group, q_head_num=heads, BLOCK_DMODEL=dim, BLOCK_DPE=0, BLOCK_DV=dim, BLOCK_N=32,
        BLOCK_H=16, MIN_BLOCK_KV=32, logit_cap=0.0, xai_temperature_len=-1, Lk=dim, Lv=dim,
    )  # fmt: skip
    # the free draft plan with the constants' tiles, or the H200's (_CARD_PLANS): 64-token KV tiles and a
    # 64-row tile, so split starts (544 at 1068 tokens) need not be multiples of the KV tile
    wide = layout == "block-free-wide"
    block_n, tile_max = (64, 64) if wide else (rows._DRAFT_BLOCK_N, rows._DRAFT_TILE_MAX)
    if free:
        per_program, row_groups, tile_rows = rows.draft_plan(width, group, tile_max)
    else:
        per_program, row_groups, tile_rows = rows.tile_plan(width, group)
    rows._shared_rows_stage1[(bs * row_groups, tiles, programs)](
        q, k_buf, v_buf, scale, req_indptr, kv_indices, row_indptr if from_indptr else lens_t, splits,
        got_o, got_l, MAX_SPLITS, programs,
        q.stride(0), q.stride(1), k_buf.stride(0), k_buf.stride(1), v_buf.stride(0), v_buf.stride(1),
        0, 0, 0, 0, got_o.stride(0), got_o.stride(1), got_o.stride(2),
        WIDTH=width, ROWS=per_program, ROW_GROUPS=row_groups, kv_group_num=group, q_head_num=heads,
        BLOCK_DMODEL=dim, BLOCK_DV=dim, BLOCK_N=block_n if free else 32, BLOCK_H=16,
        BLOCK_M=tile_rows, MIN_BLOCK_KV=32, logit_cap=0.0, xai_temperature_len=-1, Lk=dim, Lv=dim,
        LENS_FROM_INDPTR=from_indptr, USE_PDL=False, PAGE_SIZE=1, DECODE_ORDER=not free, LOOP_STAGES=None,
    )  # fmt: skip
    for r in range(n_rows):
        kvps = math.ceil(math.ceil(lens[r] / int(splits[r])) / 32) * 32
        for s in range(MAX_SPLITS):
            empty = min(kvps * (s + 1), lens[r]) <= kvps * s
            if empty:
                if not (got_o[r, :, s].isnan().all() and got_l[r, :, s].isnan().all()):
                    return f"row {r} split {s}: written, but decode leaves this empty split alone"
                continue
            for got, want, what in ((got_o, want_o, "partial"), (got_l, want_l, "lse")):
                error = float(
                    ((got[r, :, s] - want[r, :, s]).abs() / want[r, :, s].abs().clamp_min(1e-3)).max()
                )
                if not error <= 1e-6:  # NaN fails too
                    return f"row {r} split {s}: {what} off by {error:.2e} (relative)"
    want, got = torch.empty((n_rows, heads, dim)), torch.empty((n_rows, heads, dim))
    decode._fwd_kernel_stage2[(n_rows, heads)](
        want_o, want_l, want, 1.0, row_indptr, splits, None,
        want_o.stride(0), want_o.stride(1), want_o.stride(2), want.stride(0), want.stride(1),
        MAX_KV_SPLITS=MAX_SPLITS, MIN_BLOCK_KV=32, BLOCK_DV=dim, Lv=dim, HAS_SINK=False,
    )  # fmt: skip
    rows._rows_stage2[(n_rows, heads)](
        got_o, got_l, got, 1.0, row_indptr if from_indptr else lens_t, splits, None,
        got_o.stride(0), got_o.stride(1), got_o.stride(2), got.stride(0), got.stride(1),
        MAX_KV_SPLITS=MAX_SPLITS, CHUNK=4, MIN_BLOCK_KV=32, BLOCK_DV=dim, Lv=dim, HAS_SINK=False,
        LENS_FROM_INDPTR=from_indptr, USE_PDL=False,
    )  # fmt: skip
    error = float(((got - want).abs() / want.abs().clamp_min(1e-3)).max())
    return None if error <= 1e-6 else f"merged output off by {error:.2e} (relative)"


CASES = [
    # (geometry, prefixes, width, layout, split programs)
    ((12, 2, 64), [1], 8, "causal", 2),
    ((12, 2, 64), [250, 300], 8, "causal", 4),
    ((12, 2, 64), [1785, 3], 8, "causal", 2),
    ((12, 2, 64), [317], 8, "causal", 2),  # in one program: split 1 starts at 160 up to 320 tokens, then 192
    ((12, 2, 64), [700, 1], 8, "block", 2),
    ((8, 2, 64), [257, 40, 1000], 8, "causal", 2),
    ((8, 2, 64), [300], 8, "block", 1),
    # the free draft plan (its KV tiles of 64 and its row sum differ from decode's: equal within 1e-6 only)
    ((12, 2, 64), [700, 1], 8, "block-free", 2),
    ((12, 2, 64), [1060, 40], 8, "block-free-wide", 1),  # 48 rows in a 64-row tile, splits at 544
    ((12, 2, 64), [33, 2200, 511], 1, "decode", 2),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decode", type=Path, required=True, help="the released decode_attention.py")
    parser.add_argument("--patch", type=Path, required=True, help="patches/sglang/0003-*.patch")
    parser.add_argument("--work", type=Path, required=True, help="a scratch folder for the kernel modules")
    args = parser.parse_args()
    decode, rows = write_modules(args.decode, args.patch, args.work)
    failures = 0
    for seed, (geometry, prefixes, width, layout, programs) in enumerate(CASES):
        problem = run_case(decode, rows, geometry, prefixes, width, layout, programs, seed)
        failures += problem is not None
        print(f"{geometry} {prefixes} width {width} {layout} P={programs}: {problem or 'equal'}", flush=True)
    print(f"{len(CASES)} cases, {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
