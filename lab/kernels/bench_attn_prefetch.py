"""Benchmark: variants of patch 0003's stage-1 rows kernel that load the KV tiles earlier, for decode (one
row per request) and verify (8 draft rows).

Why: every 256-token split of decode's order is a chain of 32-token tiles folded one after another, and
by default Triton does not software-pipeline the kernel's tile loop (no async copy in its PTX,
docs/evidence/ptx-resources-2026-12-03): each tile waits on its own index, K and V loads. A variant that
loads the next tile's KV while the current tile's products run computes the same products in the same
order, so it may keep decode's bits; whether it does, and whether it is faster, only a card can say.

Variants (the card's launch plan otherwise, its _CARD_PLANS entry set as the module's constants):
- loop default: the tile loop as Triton compiles it by default (`_TILE_LOOP_STAGES` None: what 0003
  shipped before 2026-12-03);
- loop at 3 stages: Triton's per-loop `num_stages=3` (it then prefetches the index loads only; the
  H200's plan since 2026-12-03);
- kv-prefetch: a rewrite of the kernel's source (a module of its own; a rewrite that does not find its
  anchor stops the bench) that loads the next tile's indices, K and V into registers before this tile's
  products, the loop at Triton's default;
- each again with decode's 16-row tile on 8 warps (`_SMALL_TILE_WARPS` 8, fewer registers a thread).
The run of 2026-12-03 (docs/evidence/attn-prefetch-h200-2026-12-03) was on the series before
`_TILE_LOOP_STAGES`, where it named these shipped, index-prefetch-3 (the loop's stages by a rewrite) and
kv-prefetch.

For each case and variant: decode's and verify's output compared bit for bit with SGLang's own decode
(the stock backend's forward_decode, as checks/gpu/test_attn_exact_verify.py does), then timed (CUDA-graph
replay after an L2 flush, median of 30) when equal. Shape: the 27B target's full-attention layers (24
query heads over 4 KV heads of 256).

Usage: BITEXACT_SGLANG_TREE=<patched tree> OUT=<dir> python -m lab.kernels.bench_attn_prefetch [--quick]
Prints one line per case; writes bench_attn_prefetch.json under $OUT when set.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import inspect
import json
import os
import sys
import tempfile
from importlib import metadata
from pathlib import Path

import sglang_tree

HERE = Path(__file__).resolve().parent

WIDTH = 8
CASES = [(1, 640), (1, 2200), (1, 32768), (1, 131072), (8, 2200), (8, 32768)]
QUICK_CASES = [(1, 640), (1, 2200), (1, 131072)]

TILE_LOOP = "for start_n in tl.range(tile_start, tile_end, BLOCK_N, num_stages=LOOP_STAGES):"
INDEX_LOAD = "kv_loc = tl.load(kv_indices + req_kv_start + offs_n, mask=offs_n < tile_end, other=0)"
K_LOAD = """            k = tl.load(
                K_Buffer + offs_buf_k,
                mask=(offs_n[None, :] < tile_end) & (mask_d[:, None]),
                other=0.0,
            )
"""
V_LOAD = """            v = tl.load(
                V_Buffer + offs_buf_v,
                mask=(offs_n[:, None] < tile_end) & (mask_dv[None, :]),
                other=0.0,
            )
"""
# kv-prefetch: the first tile before the loop, the next one at the top of each iteration (page size 1,
# the layout of the bench's pools and of the recipe's servers); masked lanes read nothing and hold 0, as
# the shipped loads' `other` does. An empty split (tile_start past tile_end) loads nothing.
PROLOGUE = """        first_n = tl.minimum(tile_start, tile_end) + tl.arange(0, BLOCK_N)
        first_in = (first_n < tile_end) & (tile_start < tile_end)
        kv_loc_n = tl.load(kv_indices + req_kv_start + first_n, mask=first_in, other=0)
        k_n = tl.load(
            K_Buffer + kv_loc_n[None, :] * stride_buf_kbs + base_offs_k,
            mask=first_in[None, :] & mask_d[:, None],
            other=0.0,
        )
        v_n = tl.load(
            V_Buffer + kv_loc_n[:, None] * stride_buf_vbs + base_offs_v,
            mask=first_in[:, None] & mask_dv[None, :],
            other=0.0,
        )
"""
NEXT_TILE = """kv_loc = kv_loc_n
            k = k_n
            v = v_n
            next_n = offs_n + BLOCK_N
            next_in = next_n < tile_end
            kv_loc_n = tl.load(kv_indices + req_kv_start + next_n, mask=next_in, other=0)
            k_n = tl.load(
                K_Buffer + kv_loc_n[None, :] * stride_buf_kbs + base_offs_k,
                mask=next_in[None, :] & mask_d[:, None],
                other=0.0,
            )
            v_n = tl.load(
                V_Buffer + kv_loc_n[:, None] * stride_buf_vbs + base_offs_v,
                mask=next_in[:, None] & mask_dv[None, :],
                other=0.0,
            )"""


def _replace_once(source: str, old: str, new: str, variant: str) -> str:
    if source.count(old) != 1:
        raise SystemExit(
            f"bench_attn_prefetch: variant {variant}: anchor found {source.count(old)} times, not once: "
            f"{old[:60]!r} (the rows kernel changed: rewrite the variant for it)"
        )
    return source.replace(old, new)


def rewrite(kernel_source: str, variant: str) -> str:
    """The stage-1 kernel's source as `variant` rewrites it."""
    if variant == "as-patched":
        return kernel_source
    if variant == "kv-prefetch":
        source = _replace_once(
            kernel_source, "        " + TILE_LOOP, PROLOGUE + "        " + TILE_LOOP, variant
        )
        source = _replace_once(source, INDEX_LOAD, NEXT_TILE, variant)
        source = _replace_once(source, K_LOAD, "", variant)
        source = _replace_once(source, V_LOAD, "", variant)
        # page size 1 only: the paged branches would read the prefetched indices as pages
        return _replace_once(
            source,
            "    # decode's _fwd_grouped_kernel_stage1",
            "    tl.static_assert(PAGE_SIZE == 1)\n    # decode's _fwd_grouped_kernel_stage1",
            variant,
        )
    raise SystemExit(f"bench_attn_prefetch: unknown variant {variant}")


def variant_kernel(rows_module, variant: str):  # noqa: ANN001, ANN201
    """`_shared_rows_stage1` rewritten as `variant`, from a copy of the rows module in a file of its own
    (Triton's JIT reads a kernel's source from its file)."""
    module_source = Path(rows_module.__file__).read_text()
    kernel_source = inspect.getsource(rows_module._shared_rows_stage1.fn)
    if module_source.count(kernel_source) != 1:
        raise SystemExit("bench_attn_prefetch: the rows module's kernel source is not found once in its file")
    folder = Path(tempfile.mkdtemp(prefix="bitexact-prefetch-"))
    name = f"bitexact_rows_{variant.replace('-', '_')}"
    path = folder / f"{name}.py"
    path.write_text(module_source.replace(kernel_source, rewrite(kernel_source, variant)))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses in the module look their module up
    spec.loader.exec_module(module)
    return module._shared_rows_stage1


VARIANTS = [  # (name, kernel rewrite, _TILE_LOOP_STAGES, _SMALL_TILE_WARPS: None keeps the card's plan's)
    ("loop default", "as-patched", None, None),
    ("loop at 3 stages", "as-patched", 3, None),
    ("kv-prefetch", "kv-prefetch", None, None),
    ("loop default, small tile 8 warps", "as-patched", None, 8),
    ("loop at 3 stages, small tile 8 warps", "as-patched", 3, 8),
    ("kv-prefetch, small tile 8 warps", "kv-prefetch", None, 8),
]


def measure(harness, rows_module, kernels, bs: int, prefix: int, graph_time_us) -> dict:  # noqa: ANN001
    import torch

    case = harness.make_case([prefix] * bs, WIDTH, seed=prefix + bs)
    want = case.run_decode()  # SGLang's decode, every draft position
    step = WIDTH - 1
    idx = case.rows(step)
    q, k, v = (t[idx].contiguous() for t in (case.q, case.k_draft, case.v_draft))
    decode_batch, verify_batch = case.decode_batch(step), case.verify_batch()
    patched_kernel = rows_module._shared_rows_stage1
    plan_warps, plan_stages = rows_module._SMALL_TILE_WARPS, rows_module._TILE_LOOP_STAGES
    row: dict = {"bs": bs, "prefix": prefix, "variants": {}}
    try:
        for name, variant, stages, warps in VARIANTS:
            rows_module._shared_rows_stage1 = kernels[variant]
            rows_module._TILE_LOOP_STAGES = stages
            rows_module._SMALL_TILE_WARPS = plan_warps if warps is None else warps
            backend = case.backend
            decoded = case.run_decode(backend)
            verified = case.run_verify(backend)
            same_decode = torch.equal(decoded.view(torch.int16), want.view(torch.int16))
            same_verify = torch.equal(verified.view(torch.int16), want.view(torch.int16))
            entry = {
                "decode_bits": same_decode,
                "verify_bits": same_verify,
                "decode_us": None,
                "verify_us": None,
            }
            if same_decode:
                backend.init_forward_metadata(decode_batch)
                torch.cuda.synchronize()
                entry["decode_us"] = graph_time_us(
                    functools.partial(backend.forward_decode, q, k, v, case.layer, decode_batch)
                )
            if same_verify:
                backend.init_forward_metadata(verify_batch)
                torch.cuda.synchronize()
                entry["verify_us"] = graph_time_us(
                    functools.partial(
                        backend.forward_extend, case.q, case.k_draft, case.v_draft, case.layer, verify_batch
                    )
                )
            row["variants"][name] = entry
    finally:
        rows_module._shared_rows_stage1 = patched_kernel
        rows_module._SMALL_TILE_WARPS, rows_module._TILE_LOOP_STAGES = plan_warps, plan_stages
    del case
    torch.cuda.empty_cache()
    return row


def _cell(entry: dict, what: str) -> str:
    us = entry[f"{what}_us"]
    return "DIFFERS" if us is None else f"{us:.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="three cases: 1 x 640, 2200, 131072")
    args = parser.parse_args()
    problem = sglang_tree.install_from_env()
    if problem:
        print(problem, file=sys.stderr)
        return 2
    import attn_harness
    import torch
    from sglang.srt.layers.attention import exact_verify_attention as rows_module

    from lab.kernels.gpu_timing import graph_time_us

    triton_version = metadata.version("triton")
    print(f"device {torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton_version}")
    kernels = {"kv-prefetch": variant_kernel(rows_module, "kv-prefetch")}
    kernels["as-patched"] = rows_module._shared_rows_stage1  # the module's own, not a copy
    device = torch.device("cuda", torch.cuda.current_device())
    names = [n for n in vars(rows_module) if n.startswith(("_TILE_", "_SMALL_TILE_", "_TARGET_", "_DRAFT_"))]
    constants = {n: getattr(rows_module, n) for n in names}
    card_plans = rows_module._CARD_PLANS
    results: dict = {"variants": [name for name, *_ in VARIANTS], "rows": []}
    print("us per layer call, decode | verify; DIFFERS: not bit-equal to SGLang's decode, untimed")
    print(f"{'bs':>3} {'prefix':>7}  " + "  ".join(name for name, *_ in VARIANTS))
    out = os.environ.get("OUT")
    try:  # the card's plan as the module's constants, so that each variant may set one of them
        for name in names:
            setattr(rows_module, name, rows_module.plan_value(name, device))
        rows_module._CARD_PLANS = {}
        results["plan"] = {n: getattr(rows_module, n) for n in names}
        for bs, prefix in QUICK_CASES if args.quick else CASES:
            row = measure(attn_harness, rows_module, kernels, bs, prefix, graph_time_us)
            results["rows"].append(row)
            cells = "  ".join(
                f"{_cell(e, 'decode')} | {_cell(e, 'verify')}" for e in row["variants"].values()
            )
            print(f"{bs:>3} {prefix:>7}  {cells}", flush=True)
            if out:  # after every case: a call cut short keeps what it measured
                Path(out, "bench_attn_prefetch.json").write_text(json.dumps(results, indent=1))
    finally:
        rows_module._CARD_PLANS = card_plans
        for name, value in constants.items():
            setattr(rows_module, name, value)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
