"""Benchmark: one full-attention layer's verify, draft and decode attention, exact against stock, and the
prefill attention of patch 0006, GPU time per layer call.

Run on a CUDA card: `BITEXACT_SGLANG_TREE=<patched tree> python -m lab.kernels.bench_attn_verify
[--quick]`. One layer of the assumed Qwen3.8-27B geometry (24/4 heads, head_dim 256), 8 draft tokens,
bf16 KV, context length 262144 (max_kv_splits 1024 as in serving). Each variant is captured in a CUDA
graph and replayed between L2 flushes (median of 30; prefill: of 5).

Decode rows (per layer call, us):
- verify: stock = SGLang's deterministic unified kernel; exact = patch 0003's shared rows (decode's bits);
- draft (the DFLASH drafter's non-causal block): stock = the unified kernel, as the deterministic server
  runs it; exact = 0003's block rows;
- decode (one step of bs requests): stock-det = SGLang's split-KV decode under deterministic inference
  (fixed 256-token splits, max_kv_splits 1024); exact = the same arithmetic through 0003's kernels;
  stock = SGLang's decode without deterministic inference (adaptive splits, at most 8), what stock
  serving runs.
The exact rows run the card's own plan (0003's _CARD_PLANS over its constants); the JSON's `plan` says
which values that was.
Verify tile plans (issue 26's lead): the shared-rows kernel with other (MMA tile rows, warps, target
programs) than the constants' (32, 8, 4096), set on the patched module with the card's plan emptied; each
plan's rows are compared for bits with the constants' plan's first and timed only when equal
(checks/gpu/test_attn_exact_verify.py proves the same plans equal to decode).
Draft plans: the drafter's block under patch 0003's free draft plan (off in the constants) with other
splits, KV tiles and warps: time, relative error against the constants' plan, repeatability (two runs'
bits).
Prefill (a prompt's chunks of 8192 tokens, ms): released = the unified kernel as released (0006 taken
off); 0006 = with the causal stop; stock = SGLang's two-stage `_fwd_kernel` (stock serving). Launch
configurations of the 0006 kernel beyond the shipped one are checked for bits against it first and
timed only when equal.
Prints tables; writes bench_attn_verify.json under $OUT when set.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
from pathlib import Path

import sglang_tree
from attn_plans import DRAFT_NAMES, DRAFT_PLANS, TILE_NAMES, TILE_PLANS

HERE = Path(__file__).resolve().parent

WIDTH = 8
ROW_CASES = [(1, 640), (1, 2200), (1, 32768), (1, 131072), (4, 2200), (8, 2200), (8, 32768)]
QUICK_ROW_CASES = [(1, 640), (1, 2200), (1, 131072)]
# prompts as the recipe prefills them: chunks of 8192 (prefix, chunk)
PREFILLS = {
    "640": [(0, 640)],
    "2200": [(0, 2200)],
    "32768": [(start, 8192) for start in range(0, 32768, 8192)],
    "131072-last-chunk": [(122880, 8192)],
}
# (BLOCK_M, num_warps) beyond the shipped (64, 8) on sm_90 for head dim 256
UNIFIED_CONFIGS = [(64, 8), (128, 16), (128, 8), (64, 4)]
PLAN_CASES = [(1, 2200), (8, 2200), (1, 32768), (1, 131072)]


def row_times(case, deterministic_off, graph_time_us) -> dict[str, float]:  # noqa: ANN001
    import torch

    batch = case.verify_batch()
    times: dict[str, float] = {}
    for name, backend in (("stock", case.stock), ("exact", case.backend)):
        backend.init_forward_metadata(batch)
        torch.cuda.synchronize()
        times[f"verify_{name}"] = graph_time_us(
            functools.partial(backend.forward_extend, case.q, case.k_draft, case.v_draft, case.layer, batch)
        )
        times[f"draft_{name}"] = graph_time_us(
            functools.partial(
                backend.forward_extend, case.q, case.k_draft, case.v_draft, case.draft_layer, batch
            )
        )
    step = case.width - 1
    idx = case.rows(step)
    q, k, v = (t[idx].contiguous() for t in (case.q, case.k_draft, case.v_draft))
    decode = case.decode_batch(step)
    for name, backend in (("stock-det", case.stock), ("exact", case.backend), ("stock", deterministic_off)):
        backend.init_forward_metadata(decode)
        torch.cuda.synchronize()
        times[f"decode_{name}"] = graph_time_us(
            functools.partial(backend.forward_decode, q, k, v, case.layer, decode)
        )
    return times


def unified_launch(module, case, block_m: int, warps: int):  # noqa: ANN001, ANN201
    """The unified kernel of `module` launched as extend_attention_fwd_unified launches it, with the
    query tile and warp count given."""
    import triton

    q, k_buffer, v_buffer = case.q, case.k_buffer, case.v_buffer
    o = case.out()
    heads, dim = q.shape[1], q.shape[2]
    grid = (len(case.extend), heads, triton.cdiv(max(case.extend), block_m))
    kernel = module._fwd_kernel_unified

    def launch() -> None:
        kernel[grid](
            q, o, k_buffer, v_buffer, case.qo_indptr, case.unified_indptr, case.unified_indices,
            case.prefix_lens,
            None, None, None, None, case.scale, 1.0, heads // k_buffer.shape[-2],
            q.stride(0), q.stride(1), o.stride(0), o.stride(1),
            k_buffer.stride(0), k_buffer.stride(1), v_buffer.stride(0), v_buffer.stride(1), 0, 0, 0, 0,
            SLIDING_WINDOW_SIZE=-1, logit_cap=0.0, xai_temperature_len=-1, Lq=dim, Lv=dim,
            BLOCK_DMODEL=triton.next_power_of_2(dim), BLOCK_DPE=0, BLOCK_DV=triton.next_power_of_2(dim),
            BLOCK_M=block_m, BLOCK_N=64, IS_CAUSAL=True, USE_CUSTOM_MASK=False, HAS_SINK=False,
            IS_GFX1250=False, PAGE_SIZE=1, SCORE_MOD=None,
            num_warps=warps, num_stages=1,
        )  # fmt: skip

    return launch, o


def plan_sweep(harness, names, plans, seed: int, measure) -> list[dict]:  # noqa: ANN001
    """measure(case, batch, reference) under each plan (patch 0003's module constants `names` set to
    it, then restored) for every case of PLAN_CASES; reference: the shipped plan's output (plans[0])."""
    from sglang.srt.layers.attention import exact_verify_attention as rows_module

    shipped_plan = tuple(getattr(rows_module, n) for n in names)
    if shipped_plan != plans[0]:
        raise SystemExit(
            f"patch 0003 ships {dict(zip(names, shipped_plan, strict=True))}, the bench assumes {plans[0]}"
        )
    # each plan exactly as listed: a card's own plan (_CARD_PLANS) would override the constants
    card_plans = getattr(rows_module, "_CARD_PLANS", None)
    if card_plans is not None:
        rows_module._CARD_PLANS = {}
    try:
        return _sweep(harness, rows_module, names, plans, shipped_plan, seed, measure)
    finally:  # the card's plan back, whatever happened in the sweep
        if card_plans is not None:
            rows_module._CARD_PLANS = card_plans


def _sweep(harness, rows_module, names, plans, shipped_plan, seed: int, measure) -> list[dict]:  # noqa: ANN001
    import torch

    out = []
    for bs, prefix in PLAN_CASES:
        case = harness.make_case([prefix] * bs, WIDTH, seed=prefix + seed)
        batch = case.verify_batch()
        row: dict = {"bs": bs, "prefix": prefix, "plans": {}}
        reference = None
        try:
            for plan in plans:
                for name, value in zip(names, plan, strict=True):
                    setattr(rows_module, name, value)
                found, output = measure(case, batch, reference)
                reference = output if reference is None else reference
                row["plans"]["-".join(map(str, plan))] = found
        finally:
            for name, value in zip(names, shipped_plan, strict=True):
                setattr(rows_module, name, value)
        out.append(row)
        del case
        torch.cuda.empty_cache()
    return out


def tile_plan_times(harness, graph_time_us) -> list[dict]:  # noqa: ANN001
    """Verify rows per layer call under each of TILE_PLANS: timed only when bit-equal to the shipped plan."""
    import torch

    def measure(case, batch, shipped):  # noqa: ANN001, ANN202
        got = case.run_verify(case.backend)
        equal = shipped is None or torch.equal(got.view(torch.int16), shipped.view(torch.int16))
        entry = {"bits": "equal" if equal else "differ", "us": None}
        if equal:
            case.backend.init_forward_metadata(batch)
            torch.cuda.synchronize()
            forward = case.backend.forward_extend
            entry["us"] = graph_time_us(
                functools.partial(forward, case.q, case.k_draft, case.v_draft, case.layer, batch)
            )
        return entry, got

    return plan_sweep(harness, TILE_NAMES, TILE_PLANS, 3, measure)


def draft_plan_times(harness, graph_time_us) -> list[dict]:  # noqa: ANN001
    """The drafter's block per layer call under each of DRAFT_PLANS: time, relative error against the
    shipped plan, and whether two runs give the same bits."""
    import torch

    def measure(case, batch, shipped):  # noqa: ANN001, ANN202
        got = case.run_draft(case.backend)
        again = case.run_draft(case.backend)
        reference = got if shipped is None else shipped
        error = float((got.float() - reference.float()).norm() / reference.float().norm())
        case.backend.init_forward_metadata(batch)
        torch.cuda.synchronize()
        forward = case.backend.forward_extend
        us = graph_time_us(
            functools.partial(forward, case.q, case.k_draft, case.v_draft, case.draft_layer, batch)
        )
        repeat = torch.equal(got.view(torch.int16), again.view(torch.int16))
        return {"us": us, "rel_error": error, "repeatable": repeat}, got

    return plan_sweep(harness, DRAFT_NAMES, DRAFT_PLANS, 5, measure)


def prefill_times(harness, patched, stock_unified, graph_time_us) -> dict:  # noqa: ANN001
    import torch

    out: dict = {}
    for name, chunks in PREFILLS.items():
        row: dict = {"released": 0.0, "0006": 0.0, "stock": 0.0, "configs": {}}
        for prefix, extend in chunks:
            case = harness.make_prefill([prefix], [extend], geometry=(24, 4, 256), seed=prefix + extend)
            time = functools.partial(graph_time_us, iters=5, warmup=1)
            row["released"] += time(
                functools.partial(case.unified, stock_unified.extend_attention_fwd_unified)
            )
            row["0006"] += time(functools.partial(case.unified, patched.extend_attention_fwd_unified))
            row["stock"] += time(functools.partial(case.stock_two_stage, patched.extend_attention_fwd))
            shipped = case.unified(patched.extend_attention_fwd_unified)
            for block_m, warps in UNIFIED_CONFIGS:
                key = f"m{block_m}-w{warps}"
                launch, o = unified_launch(patched, case, block_m, warps)
                launch()
                equal = torch.equal(o.view(torch.int16), shipped.view(torch.int16))
                entry = row["configs"].setdefault(key, {"bits": "equal", "us": 0.0})
                if not equal:
                    entry["bits"] = "differ"
                if entry["bits"] == "equal":
                    entry["us"] += time(launch)
            torch.cuda.empty_cache()
        out[name] = row
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="three row cases, no prefill")
    args = parser.parse_args()
    problem = sglang_tree.install_from_env()
    if problem:
        print(problem, file=sys.stderr)
        return 2
    import attn_harness
    import prefill_harness
    import torch
    import triton
    from sglang.kernels.ops.attention import extend_attention

    from lab.kernels.gpu_timing import graph_time_us

    print(f"device {torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}")
    from sglang.srt.layers.attention import exact_verify_attention as rows_module

    device = torch.device("cuda", torch.cuda.current_device())
    plan_names = (*TILE_NAMES, *DRAFT_NAMES)
    # what the exact rows ran: the card's plan over the constants (constants alone before _CARD_PLANS)
    value = getattr(rows_module, "plan_value", lambda name, _device: getattr(rows_module, name))
    results: dict = {"rows": [], "prefill": {}, "plan": {n: value(n, device) for n in plan_names}}
    print(f"plan of the exact rows: {results['plan']}")
    columns = [
        "verify_stock", "verify_exact", "draft_stock", "draft_exact",
        "decode_stock-det", "decode_exact", "decode_stock",
    ]  # fmt: skip
    print("{:>3} {:>7} ".format("bs", "prefix") + " ".join(f"{c:>16}" for c in columns))
    for bs, prefix in QUICK_ROW_CASES if args.quick else ROW_CASES:
        case = attn_harness.make_case([prefix] * bs, WIDTH, seed=prefix)
        plain = attn_harness.make_backend(
            case.backend.token_to_kv_pool, case.backend.req_to_token_pool, WIDTH, deterministic=False
        )
        row = {"bs": bs, "prefix": prefix, **row_times(case, plain, graph_time_us)}
        results["rows"].append(row)
        print(f"{bs:>3} {prefix:>7} " + " ".join(f"{row[c]:>16.1f}" for c in columns), flush=True)
        del case, plain
        torch.cuda.empty_cache()
    results["tile_plans"] = tile_plan_times(attn_harness, graph_time_us)
    legend = "rows-warps-programs-small warps-loop stages"
    print(f"verify rows per tile plan ({legend}), us per layer call; differ: untimed")
    for row in results["tile_plans"]:
        cells = ", ".join(
            f"{k} {v['bits'] if v['us'] is None else format(v['us'], '.1f')}" for k, v in row["plans"].items()
        )
        print(f"{row['bs']:>3} {row['prefix']:>7}  {cells}", flush=True)
    results["draft_plans"] = draft_plan_times(attn_harness, graph_time_us)
    print("draft block per plan (free-split-block_n-warps-tile): us per layer call, rel. error, repeatable")
    for row in results["draft_plans"]:
        cells = ", ".join(
            f"{k} {v['us']:.1f} {v['rel_error']:.1e} {'rep' if v['repeatable'] else 'NOT-REPEATABLE'}"
            for k, v in row["plans"].items()
        )
        print(f"{row['bs']:>3} {row['prefix']:>7}  {cells}", flush=True)
    if not args.quick:
        stock_unified = prefill_harness.stock_unified_module(sglang_tree.tree_from_env() / "sglang")
        results["prefill"] = prefill_times(prefill_harness, extend_attention, stock_unified, graph_time_us)
        print("prefill attention, one layer, us (released unified / 0006 / stock two-stage; configs)")
        for name, row in results["prefill"].items():
            configs = ", ".join(f"{k} {v['bits']} {v['us']:.0f}" for k, v in row["configs"].items())
            print(
                f"{name:>18} {row['released']:>10.0f} {row['0006']:>10.0f} {row['stock']:>10.0f}  {configs}"
            )
    out = os.environ.get("OUT")
    if out:
        Path(out, "bench_attn_verify.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
