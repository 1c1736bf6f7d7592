"""Exact GEMM sweep (issue 18): patch 0005's route against cuBLAS and SGLang's persistent kernel, on one card.

Run on a CUDA card: `BITEXACT_SGLANG_TREE=<patched tree> python -m lab.kernels.bench_exact_gemm --out DIR`
(lab/kernels/exact_gemm_sweep.sh does the whole H200 call). For each (N, K) in SHAPES:
1. bits: every candidate (CANDIDATES, through the route's own `exact_gemm(config=...)`) against the
   persistent kernel (`_matmul_persistent_triton`) for M = 1..64 and BITS_LARGE_MS, every row also alone
   (checks/gpu/gemm_bits.py, the GPU check's own proof);
2. time, as CUDA-graph replays after an L2 flush (gpu_timing.py), at each M of --ms: cuBLAS (torch.matmul),
   the persistent kernel, the route's current rule (config=None), and every bit-equal candidate whose tile
   height suits that M (BLOCK_M at most 4 x M, and at least 64 from M = 512).
Then exact_gemm_table.fit picks, per bucket of M, the rule that minimises the worst median (over the model's
shapes) of route / cuBLAS, and the summary compares the current rule, the fitted one, the persistent kernel
and the best candidate per M.

Writes as it goes, to --out: progress.jsonl, the table `exact-gemm-sm<cc>-<SMs>sm-<L2>mib.json`
(exact_gemm_table's format; commit it under docs/evidence/exact-gemm-<card>-<date>/) after every shape, and
summary.txt with the fitted rule. Kernels compile first in --workers processes sharing Triton's cache.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import json
import multiprocessing
import os
import sys
import time
import traceback
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import exact_gemm_table
import sglang_tree

HERE = Path(__file__).resolve().parent

# (N, K, source, a GEMM of the 27B-shaped model): geometry as lab/perf/model_27b.py states it.
SHAPES: list[tuple[int, int, str, bool]] = [
    (96, 5120, "GDN in_proj_ba", True),
    (5120, 6144, "attention o_proj, GDN out_proj", True),
    (14336, 5120, "attention qkv_proj with output gate", True),
    (16384, 5120, "GDN in_proj_qkvz", True),
    (5120, 17408, "MLP down_proj", True),
    (34816, 5120, "MLP gate_up_proj", True),
    (248320, 5120, "LM head (vocabulary 248320; decode M only)", True),
    (3584, 18944, "Qwen2-7B down (not the model's)", False),
]
LM_HEAD_MAX_M = 64  # logits are computed for the last position of each request only
DEFAULT_BITS_MS = "1-64,65,128,200"
DEFAULT_MS = "1,4,8,16,24,32,48,64,96,128,256,512,2200,8192"
# The persistent kernel's own tile, through the route: the interpreter mode's stand-in for the reference.
PERSISTENT_TILE = {
    "LOAD": "kn",
    "BLOCK_M": 128,
    "BLOCK_N": 128,
    "BLOCK_K": 64,
    "num_warps": 8,
    "PROGRAMS_PER_SM": 1,
}


def _cfg(
    load: str, bm: int, bn: int, bk: int, warps: int, stages: int, per_sm: int = 0, group: int = 8
) -> dict:
    return {
        "LOAD": load,
        "BLOCK_M": bm,
        "BLOCK_N": bn,
        "BLOCK_K": bk,
        "GROUP_M": group,
        "num_warps": warps,
        "num_stages": stages,
        "PROGRAMS_PER_SM": per_sm,
        "FLATTEN": False,
    }


CANDIDATES: list[dict] = [
    # M <= 16: patch 0004's H200-fitted configs (docs/kernels.md) and neighbours
    _cfg("nk", 16, 16, 256, 4, 6),
    _cfg("kn", 16, 32, 256, 4, 4),
    _cfg("kn", 16, 64, 128, 4, 4),
    _cfg("tma", 16, 128, 128, 4, 3, per_sm=4),
    _cfg("tma", 16, 32, 256, 4, 4),
    _cfg("tma", 16, 64, 128, 4, 5),
    # 17..32 rows
    _cfg("tma", 32, 32, 256, 4, 4),
    _cfg("tma", 32, 64, 128, 4, 5),
    _cfg("tma", 32, 128, 128, 4, 3, per_sm=4),
    _cfg("kn", 32, 32, 256, 4, 4),
    _cfg("kn", 32, 64, 128, 4, 4),
    # 33..64 rows: one warpgroup's wgmma height
    _cfg("tma", 64, 16, 256, 4, 4),
    _cfg("tma", 64, 32, 128, 4, 6),
    _cfg("tma", 64, 32, 256, 4, 4),
    _cfg("tma", 64, 64, 128, 4, 4),
    _cfg("tma", 64, 64, 64, 4, 6),
    _cfg("tma", 64, 128, 64, 4, 4),
    _cfg("tma", 64, 128, 128, 4, 3, per_sm=2),
    _cfg("kn", 64, 32, 128, 4, 4),
    _cfg("kn", 64, 64, 128, 4, 4),
    # prefill-sized M
    _cfg("kn", 128, 128, 64, 8, 3, per_sm=1),  # the persistent kernel's own tile
    _cfg("tma", 128, 128, 64, 8, 3, per_sm=1),
    _cfg("tma", 128, 128, 64, 4, 4, per_sm=1),
    _cfg("tma", 128, 256, 64, 8, 3, per_sm=1),
    _cfg("tma", 128, 256, 64, 8, 4, per_sm=1),
    _cfg("tma", 128, 128, 128, 8, 3, per_sm=1),
    _cfg("tma", 64, 256, 64, 4, 4, per_sm=1),
    _cfg("tma", 128, 256, 64, 8, 3),
    _cfg("tma", 128, 128, 64, 8, 4),
]


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or "exact-gemm-sweep-out"))
    p.add_argument("--ms", default=DEFAULT_MS, help=f"Ms to time (default {DEFAULT_MS})")
    p.add_argument(
        "--bits-ms", default=DEFAULT_BITS_MS, help=f"Ms of the bit proof (default {DEFAULT_BITS_MS})"
    )
    p.add_argument("--candidates", default="", help="comma list of candidate ids to run a subset")
    p.add_argument("--iters", type=int, default=20, help="graph replays per timing (median)")
    p.add_argument("--budget-s", type=float, default=330.0, help="stop timing after this (bits go on)")
    p.add_argument("--shapes", default="", help="comma list of NxK to run a subset")
    p.add_argument("--workers", type=int, default=12, help="processes that compile the candidates first")
    # Test mode (checks/offline/test_exact_gemm_interpreter.py): Triton's interpreter on a CPU, float16,
    # wall-clock times, the route's own persistent-tile config as the reference, this many SMs and this L2
    # size; proves the script's plumbing, measures nothing.
    p.add_argument("--interpret-cpu", default=None, metavar="SMS,L2_BYTES", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def ms_list(spec: str) -> list[int]:
    """'1-64,128' -> [1, ..., 64, 128]."""
    values: set[int] = set()
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        values |= set(range(int(lo), int(hi or lo) + 1))
    if not values or min(values) < 1:
        raise SystemExit(f"{spec!r}: Ms are positive integers")
    return sorted(values)


def log(out: Path, **event: object) -> None:
    event = {"t": round(time.time(), 1), **event}
    with (out / "progress.jsonl").open("a") as handle:
        handle.write(json.dumps(event) + "\n")
    print(json.dumps(event), flush=True)


def _precompile(ids: list[str]) -> list[str]:
    """Worker: launch each candidate once on small operands (same specialisation as the sweep's shapes)."""
    problem = sglang_tree.install_from_env()
    if problem:
        return [f"tree: {problem}"]
    import torch
    from sglang.srt.batch_invariant_ops import exact_gemm, exact_gemm_tiles

    by_id = {exact_gemm_tiles.config_id(c): c for c in CANDIDATES}
    a = torch.randn((64, 512), device="cuda").to(torch.bfloat16)
    w = torch.randn((512, 512), device="cuda").to(torch.bfloat16)
    errors = []
    for cid in ids:
        try:
            exact_gemm.exact_gemm(a, w.t(), config=by_id[cid])
        except Exception as error:
            errors.append(f"{cid}: {type(error).__name__}: {str(error)[:200]}")
    torch.cuda.synchronize()
    return errors


def suits(config: dict, m: int) -> bool:
    return config["BLOCK_M"] <= max(16, 4 * m) and (m < 512 or config["BLOCK_M"] >= 64)


class Card:
    """What the sweep measures on: the CUDA card (graph replays after an L2 flush, the persistent kernel as
    reference, cuBLAS), or in --interpret-cpu mode the CPU under Triton's interpreter (wall clock, float16,
    the route's persistent-tile config as the reference)."""

    def __init__(self, args: argparse.Namespace) -> None:
        import torch
        import triton
        from sglang.srt.batch_invariant_ops import exact_gemm

        self.torch, self.iters, self.exact_gemm = torch, args.iters, exact_gemm
        if args.interpret_cpu:
            from sglang.srt.batch_invariant_ops import small_m_route

            sms, l2 = (int(v) for v in args.interpret_cpu.split(","))
            small_m_route._card = lambda device: (sms, l2)  # the route's one device query
            self.device, self.dtype = "cpu", torch.float16
            self.info = {
                "name": "cpu (Triton interpreter)",
                "capability": "0.0",
                "sm_count": sms,
                "l2_bytes": l2,
            }
            self.reference = functools.partial(exact_gemm.exact_gemm, config=PERSISTENT_TILE)
            self.time_us = self._wall_us
        else:
            from sglang.srt.batch_invariant_ops import batch_invariant_ops as bio

            from lab.kernels.gpu_timing import graph_time_us

            props = torch.cuda.get_device_properties(0)
            self.device, self.dtype = "cuda", torch.bfloat16
            self.info = {
                "name": props.name,
                "capability": f"{props.major}.{props.minor}",
                "sm_count": props.multi_processor_count,
                "l2_bytes": int(getattr(props, "L2_cache_size", 0)),
            }
            self.reference = lambda x, b: bio._matmul_persistent_triton(x, b, torch.bfloat16)
            self.time_us = lambda fn: graph_time_us(fn, iters=self.iters)
        self.info.update(torch=torch.__version__, triton=triton.__version__, cuda=torch.version.cuda)

    def _wall_us(self, fn) -> float:  # noqa: ANN001
        fn()
        began = time.perf_counter()
        fn()
        return (time.perf_counter() - began) * 1e6


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    problem = sglang_tree.install_from_env()
    if problem:
        print(problem, file=sys.stderr)
        return 2
    import torch
    from gemm_bits import first_difference
    from sglang.srt.batch_invariant_ops import exact_gemm, exact_gemm_tiles

    start = time.time()
    card = Card(args)
    device = card.info
    candidates = {exact_gemm_tiles.config_id(c): exact_gemm_tiles.check_config(c) for c in CANDIDATES}
    if args.candidates:
        unknown = [c for c in args.candidates.split(",") if c not in candidates]
        if unknown:
            raise SystemExit(f"--candidates: unknown {unknown}; ids look like {next(iter(candidates))}")
        candidates = {c: candidates[c] for c in args.candidates.split(",")}
    table = {
        "schema": exact_gemm_table.SCHEMA,
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "device": device,
        "rule_source": exact_gemm_tiles.RULE_SOURCE,
        "candidates": candidates,
        "shapes": [],
        "complete": False,
    }
    path = args.out / exact_gemm_table.table_name(
        device["capability"], device["sm_count"], device["l2_bytes"]
    )
    if args.workers > 0 and not args.interpret_cpu:
        ids = list(candidates)
        chunks = [ids[i :: args.workers] for i in range(args.workers)]
        with ProcessPoolExecutor(args.workers, mp_context=multiprocessing.get_context("spawn")) as pool:
            errors = [e for errs in pool.map(_precompile, chunks) for e in errs]
        log(args.out, stage="precompile", seconds=round(time.time() - start, 1), errors=errors)
    ms, bit_ms = ms_list(args.ms), ms_list(args.bits_ms)
    shapes = SHAPES
    if args.shapes:
        known = {(n, k): (source, model) for n, k, source, model in SHAPES}
        picked = [tuple(int(v) for v in s.lower().split("x")) for s in args.shapes.split(",")]
        shapes = [(n, k, *known.get((n, k), ("command line", False))) for n, k in picked]
    timed_out = False
    for n, k, source, model in shapes:
        gen = torch.Generator(device="cpu").manual_seed(n + k)
        time_ms = [m for m in ms if n != 248320 or m <= LM_HEAD_MAX_M]
        a = torch.randn((max([*time_ms, *bit_ms]), k), generator=gen).to(card.dtype).to(card.device)
        w = torch.randn((n, k), generator=gen).mul_(k**-0.5).to(card.dtype).to(card.device)
        b = w.t()
        shape = {"N": n, "K": k, "source": source, "model": model, "bits": {}, "us": {}}
        want = {m: card.reference(a[:m].contiguous(), b) for m in bit_ms}
        for cid, config in candidates.items():
            try:
                route = functools.partial(exact_gemm.exact_gemm, b=b, config=config)
                difference = first_difference(route, a, want)
                shape["bits"][cid] = "equal" if difference is None else f"differs: {difference}"
            except Exception as error:
                shape["bits"][cid] = f"error: {type(error).__name__}: {str(error)[:300]}"
        del want
        equal = sum(v == "equal" for v in shape["bits"].values())
        log(args.out, stage="bits", N=n, K=k, equal=equal, of=len(candidates))
        for m in time_ms:
            if time.time() - start > args.budget_s:
                timed_out = True
                break
            x = a[:m].contiguous()
            row = {
                "cublas": card.time_us(functools.partial(torch.matmul, x, b)),
                "persistent": card.time_us(functools.partial(card.reference, x, b)),
                "rule": card.time_us(functools.partial(exact_gemm.exact_gemm, x, b)),
            }
            for cid, config in candidates.items():
                if shape["bits"][cid] == "equal" and suits(config, m):
                    try:
                        row[cid] = card.time_us(functools.partial(exact_gemm.exact_gemm, x, b, config=config))
                    except Exception as error:  # one failing candidate must not stop the sweep
                        shape.setdefault("time_errors", {})[f"{cid}@{m}"] = str(error)[:300]
            shape["us"][str(m)] = {key: round(us, 2) for key, us in row.items()}
            log(
                args.out,
                stage="time",
                N=n,
                K=k,
                M=m,
                **{key: shape["us"][str(m)][key] for key in ("cublas", "persistent", "rule")},
            )
        table["shapes"].append(shape)
        path.write_text(json.dumps(table, indent=1) + "\n")
        del a, w, b
        if card.device == "cuda":
            torch.cuda.empty_cache()
        if timed_out:
            log(args.out, stage="budget", seconds=round(time.time() - start, 1))
            break
    table["complete"] = not timed_out
    tiles = exact_gemm_tiles
    lines = exact_gemm_table.summary(table, tiles.choose, tiles.check_config, "the shipped rule")
    try:
        fitted = exact_gemm_table.fit(table, tiles)
        table["rule_fitted"] = fitted
        choose = functools.partial(_choose_with, tiles, fitted)
        lines += ["", *exact_gemm_table.summary(table, choose, tiles.check_config, "the fitted rule")]
        lines += ["", "fitted rule:", json.dumps(fitted, indent=1)]
    except Exception:
        table["fit_error"] = traceback.format_exc()[-2000:]
        lines += ["", f"fit failed: {table['fit_error']}"]
    path.write_text(json.dumps(table, indent=1) + "\n")
    text = "\n".join(
        [f"{device['name']}, {device['sm_count']} SMs, L2 {device['l2_bytes'] >> 20} MiB", *lines]
    )
    (args.out / "summary.txt").write_text(text + "\n")
    print(text)
    return 0


def _choose_with(tiles, rule: dict, *shape: int) -> dict:  # noqa: ANN001
    return tiles.choose(*shape, rule=rule)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
