"""Small-M sweep (issue 12): every candidate config of the route, bits first, then bandwidth, on one card.

Run on a CUDA card: `BITEXACT_SGLANG_TREE=<patched tree> python -m lab.kernels.bench_smallm_sweep --out DIR`
(lab/kernels/smallm_sweep.sh does the whole H200 run). For each (N, K) of smallm_plan.SHAPES:
1. bits: every candidate (smallm_plan.candidates(), through the patched route's own `small_m_matmul`) against
   the first route (smallm_reference.py) for M = 1..16, and every row of M = 16 against that row alone
   (batch invariance); a candidate that differs or fails is recorded and never timed;
2. time, as CUDA-graph replays after an L2 flush (gpu_timing.py): cuBLAS (torch.matmul), the first route and
   every bit-equal candidate at the sweep Ms (times are flat in M), plus three references: torch.sum over the
   weights (read only), and a load-only Triton kernel over the same [16, 256] TMA boxes split over N only
   (what the K order allows) and over N and K (what it forbids);
3. fit the route's rule (smallm_table.fit_rule) and time cuBLAS, the first route, the shipped rule's choice,
   the fitted rule's choice and the best candidate at every M = 1..16.
%copy = (weights + activations + output bytes) / time, against an eager device-to-device copy of 4 GiB
(read + write) measured in the same run. Shapes under 2 x L2 are launch-bound: reported, no target.

Writes as it goes, to --out: progress.jsonl (one line per shape and stage), the table
`smallm-sm<cc>-<SMs>sm-<L2>mib.json` (smallm_table's format; commit it under
docs/evidence/smallm-<card>-<date>/), rewritten after every shape, and summary.txt. One failing candidate
never stops the run; the summary lists the failures.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import json
import math
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path

import sglang_tree
import smallm_plan
import smallm_table

HERE = Path(__file__).resolve().parent

TARGET_CARD = (188, 128 << 20)  # the recipe's RTX PRO 6000 Blackwell: SMs, L2 bytes (DESIGN.md, issue 12)


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or "smallm-sweep-out"))
    p.add_argument("--sweep-ms", default="1,8,16", help="Ms every candidate is timed at (default 1,8,16)")
    p.add_argument("--all-ms", default="1-16", help="Ms the final choices are timed at (default 1-16)")
    p.add_argument("--candidates", default="", help="comma list of candidate ids to run a subset")
    p.add_argument("--iters", type=int, default=20, help="graph replays per timing (median)")
    p.add_argument(
        "--budget-s", type=float, default=200.0, help="stop timing candidates after this (bits go on)"
    )
    p.add_argument("--shapes", default="", help="comma list of NxK to run a subset, e.g. 5120x17408")
    p.add_argument(
        "--compile-workers", type=int, default=-1, help="processes that precompile (-1: auto, 0: none)"
    )
    p.add_argument("--compile-only", default=None, help=argparse.SUPPRESS)  # worker mode: kernel ids
    # Test mode (lab/tests/test_smallm_interpreter.py): Triton's interpreter on a CPU, wall-clock times,
    # this many SMs and this L2 size; proves the script's plumbing, measures nothing.
    p.add_argument("--interpret-cpu", default=None, metavar="SMS,L2_BYTES", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def ms_list(spec: str) -> list[int]:
    """'1,8,16' or '1-16' -> Ms; each between 1 and 16 (the route's cap)."""
    values: list[int] = []
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        values += list(range(int(lo), int(hi or lo) + 1))
    if not values or min(values) < 1 or max(values) > 16:
        raise SystemExit(f"{spec!r}: Ms must lie in 1..16")
    return values


def selected_shapes(spec: str) -> list[tuple[int, int, str]]:
    """The plan's shapes, or the NxK list given (a shape outside the plan is labelled 'command line')."""
    if not spec:
        return list(smallm_plan.SHAPES)
    sources = {(n, k): source for n, k, source in smallm_plan.SHAPES}
    shapes = []
    for item in spec.split(","):
        try:
            n, k = (int(v) for v in item.lower().split("x"))
        except ValueError:
            raise SystemExit(f"--shapes {spec!r}: {item!r} is not NxK (e.g. 5120x17408)") from None
        shapes.append((n, k, sources.get((n, k), "command line")))
    return shapes


def selected_candidates(spec: str) -> dict[str, dict]:
    every = smallm_plan.candidates()
    if not spec:
        return every
    wanted = spec.split(",")
    unknown = [c for c in wanted if c not in every]
    if unknown:
        raise SystemExit(f"--candidates: unknown {unknown}; ids look like {next(iter(every))}")
    return {c: every[c] for c in wanted}


class CudaCard:
    """The real thing: CUDA-graph replays after an L2 flush, the card's own SM count and L2 size."""

    device = "cuda"
    reference_sm_count = None  # the first route asks the device, as it did
    dtype_name = "bfloat16"

    def __init__(self, iters: int) -> None:
        import torch

        from lab.kernels.gpu_timing import dram_copy_gbps, dram_read_gbps, graph_time_us

        self.torch, self.iters = torch, iters
        self._graph_time_us, self._copy, self._read = graph_time_us, dram_copy_gbps, dram_read_gbps
        props = torch.cuda.get_device_properties(0)
        self.sm_count = props.multi_processor_count
        self.l2 = int(getattr(props, "L2_cache_size", 0))
        self.info = {
            "name": props.name,
            "capability": f"{props.major}.{props.minor}",
            "sm_count": self.sm_count,
            "l2_bytes": self.l2,
            "shared_per_block": int(getattr(props, "shared_memory_per_block_optin", 0)),
            "memory_bytes": int(props.total_memory),
            "driver": driver_version(),
        }

    def time_us(self, fn) -> float:  # noqa: ANN001
        return self._graph_time_us(fn, iters=self.iters)

    def denominators(self) -> tuple[dict, float]:
        return self._copy(), self._read()

    def generator(self, seed: int):  # noqa: ANN201
        return self.torch.Generator(device="cuda").manual_seed(seed)

    def release(self) -> None:
        self.torch.cuda.empty_cache()


class InterpretedCpu:
    """Test mode: Triton's interpreter on a CPU (TRITON_INTERPRET=1), a stated SM count and L2 size,
    wall-clock times of eager calls. The route's one device query (`_card`) answers with those; nothing
    else is patched. Operands are float16: the interpreter cannot multiply bfloat16
    (triton-lang/triton#11584), and float16 has the same size: every index, stride and TMA box is bf16's."""

    device = "cpu"
    dtype_name = "float16"

    def __init__(self, spec: str, route) -> None:  # noqa: ANN001
        import torch

        if os.environ.get("TRITON_INTERPRET") != "1":
            raise SystemExit("--interpret-cpu needs TRITON_INTERPRET=1")
        sms, l2 = (int(v) for v in spec.split(","))
        self.torch, self.sm_count, self.l2, self.reference_sm_count = torch, sms, l2, sms
        route._card = lambda device: (sms, l2)
        self.info = {"name": "Triton interpreter (CPU)", "capability": "0.0", "sm_count": sms, "l2_bytes": l2}

    def time_us(self, fn) -> float:  # noqa: ANN001
        fn()
        start = time.perf_counter()
        fn()
        return (time.perf_counter() - start) * 1e6

    def denominators(self) -> tuple[dict, float]:
        src = self.torch.ones(8 << 20, dtype=self.torch.bfloat16)
        dst = self.torch.empty_like(src)
        us = self.time_us(functools.partial(dst.copy_, src))
        gbps = 2 * src.numel() * 2 / (us * 1e-6) / 1e9
        return {"memcpy_eager": gbps, "memcpy_graph": gbps, "kernel_eager": gbps}, gbps / 2

    def generator(self, seed: int):  # noqa: ANN201
        return self.torch.Generator(device="cpu").manual_seed(seed)

    def release(self) -> None:
        return None


class Sweep:
    def __init__(self, args: argparse.Namespace) -> None:
        import smallm_reference
        import torch
        import triton
        from sglang.srt.batch_invariant_ops import small_m_route, small_m_tiles

        self.torch, self.triton, self.args = torch, triton, args
        self.route, self.tiles, self.reference = small_m_route, small_m_tiles, smallm_reference
        self.card = (
            InterpretedCpu(args.interpret_cpu, small_m_route) if args.interpret_cpu else CudaCard(args.iters)
        )
        self.sweep_ms, self.all_ms = ms_list(args.sweep_ms), ms_list(args.all_ms)
        self.out: Path = args.out
        self.out.mkdir(parents=True, exist_ok=True)
        self.started = time.monotonic()
        self.progress = (self.out / "progress.jsonl").open("a")
        self.sm_count, self.l2 = self.card.sm_count, self.card.l2
        self.device = {**self.card.info, "torch": torch.__version__, "triton": triton.__version__}
        self.device["cuda"] = torch.version.cuda
        self.device["operands"] = self.card.dtype_name
        self.candidates = selected_candidates(args.candidates)
        self.table_path = self.out / smallm_table.table_name(
            self.device["capability"], self.sm_count, self.l2
        )
        self.table: dict = {
            "schema": smallm_table.SCHEMA,
            "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "command": "python " + " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
            "device": self.device,
            "denominator": "memcpy_eager",
            "sweep_ms": self.sweep_ms,
            "all_ms": self.all_ms,
            "iters": args.iters,
            "rule_shipped": self.tiles.RULE,
            "candidates": self.candidates,
            "shapes": [],
            "complete": False,
        }

    # --- bookkeeping --------------------------------------------------------------------------------------

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def log(self, record: dict) -> None:
        self.progress.write(json.dumps({"t": round(self.elapsed(), 1), **record}) + "\n")
        self.progress.flush()

    def save_table(self) -> None:
        tmp = self.table_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.table, indent=1, default=str) + "\n")
        tmp.replace(self.table_path)

    def say(self, text: str) -> None:
        print(f"[{self.elapsed():6.1f}s] {text}", flush=True)

    # --- measurements -------------------------------------------------------------------------------------

    def denominators(self) -> None:
        copies, read = self.card.denominators()
        self.table["copy_gbps"] = copies
        self.table["read_gbps"] = read
        self.copy = copies["memcpy_eager"]
        self.say(
            "device-to-device copy, GB/s read + write: "
            + ", ".join(f"{k} {v:.0f}" for k, v in copies.items())
            + f"; read-only torch.sum {read:.0f}; denominator: memcpy_eager"
        )
        self.log({"stage": "denominators", "copy_gbps": copies, "read_gbps": read})

    def time_us(self, fn) -> float:  # noqa: ANN001
        return self.card.time_us(fn)

    def first_route(self, a, b):  # noqa: ANN001, ANN201
        return self.reference.first_route_matmul(a, b, sm_count=self.card.reference_sm_count)

    def times(self, fn, a16, ms: list[int]) -> dict:  # noqa: ANN001
        """{M: us} of `fn(a16[:M])` for each M, or {"error": ...}: one failure never stops the sweep."""
        try:
            return {str(m): self.time_us(functools.partial(fn, a16[:m])) for m in ms}
        except Exception as error:
            return {"error": f"{type(error).__name__}: {str(error)[:300]}"}

    def bits(self, config: dict, a16, b, ref: dict) -> str:  # noqa: ANN001
        """'equal', or how the candidate differs from the first route / from its own single rows."""
        from gemm_bits import first_difference

        try:
            difference = first_difference(
                functools.partial(self.route.small_m_matmul, b=b, config=config), a16, ref
            )
            return "equal" if difference is None else f"differs from the first route: {difference}"
        except Exception as error:  # one failing candidate must not stop the sweep
            return f"error: {type(error).__name__}: {str(error)[:300]}"

    def roofline(self, w, n: int, k: int) -> dict:  # noqa: ANN001
        """References at M = 0: torch.sum over the weights; load-only TMA streams split over N, and N x K."""
        torch, triton = self.torch, self.triton
        results: dict = {}
        try:
            flat = w.view(-1)
            results["read_sum"] = self.time_us(functools.partial(torch.sum, flat, dtype=torch.float32))
        except Exception as error:
            results["read_sum_error"] = f"{type(error).__name__}: {error}"
        try:
            from lab.kernels.smallm_stream import stream_weights

            tiles = triton.cdiv(n, 16)
            splits = max(1, math.ceil(8 * self.sm_count / tiles))
            for name, s in (("stream_n", 1), ("stream_nk", splits)):
                results[name] = self.time_us(functools.partial(stream_weights, w, s))
            results["stream_nk_splits"] = splits
        except Exception as error:
            results["stream_error"] = f"{type(error).__name__}: {str(error)[:300]}"
        return results

    def operands(self, n: int, k: int):  # noqa: ANN201
        """The weight [N, K] (scaled so outputs stay O(1)) and 16 activation rows, the same on every call."""
        torch, device, dtype = self.torch, self.card.device, getattr(self.torch, self.card.dtype_name)
        gen = self.card.generator(n * 100003 + k)
        w = torch.randn((n, k), generator=gen, device=device).mul_(k**-0.5).to(dtype)
        return w, torch.randn((16, k), generator=gen, device=device).to(dtype)

    def shape(self, n: int, k: int, source: str) -> dict:
        torch, route = self.torch, self.route
        w, a16 = self.operands(n, k)
        b = w.t()
        weight_bytes = 2 * n * k
        row: dict = {
            "N": n,
            "K": k,
            "source": source,
            "weight_bytes": weight_bytes,
            "large": weight_bytes >= 2 * self.l2,
            "first_route_config": self.reference.first_route_config(n, k, self.sm_count),
            "rule_shipped": self.tiles.choose(n, k, self.sm_count, self.l2),
            "tma_ready": bool(route._tma_ready(a16) and route._tma_ready(w)),
            "results": {},
        }
        ref = {m: self.first_route(a16[:m], b) for m in range(1, 17)}
        first_alone = [self.first_route(a16[i : i + 1], b)[0] for i in range(16)]
        row["first_route_batch_invariant"] = all(torch.equal(first_alone[i], ref[16][i]) for i in range(16))
        t0 = self.elapsed()
        for cid, config in self.candidates.items():
            row["results"][cid] = {"bits": self.bits(config, a16, b, ref), "us": None}
        equal = [c for c, r in row["results"].items() if r["bits"] == "equal"]
        self.log({"stage": "bits", "N": n, "K": k, "equal": len(equal), "of": len(self.candidates)})
        self.say(f"({n}, {k}) bits: {len(equal)}/{len(self.candidates)} equal in {self.elapsed() - t0:.1f}s")

        row["cublas_us"] = self.times(functools.partial(cublas, b=b), a16, self.sweep_ms)
        row["first_route_us"] = self.times(functools.partial(self.first_route, b=b), a16, self.sweep_ms)
        over = False
        for cid in equal:
            if self.elapsed() > self.args.budget_s:
                over = True
                row["results"][cid]["not_timed"] = "budget"
                continue
            timed = self.times(
                functools.partial(route.small_m_matmul, b=b, config=self.candidates[cid]), a16, self.sweep_ms
            )
            if "error" in timed:
                row["results"][cid]["timing_error"] = timed["error"]
            else:
                row["results"][cid]["us"] = timed
        if over:
            row["budget_exhausted"] = True
        row["roofline"] = self.roofline(w, n, k)
        row["all_m"] = {}
        self.all_m(row, a16, b, self.best_and_shipped(row))
        self.log(
            {"stage": "timed", "N": n, "K": k, "cublas_us": row["cublas_us"], "roofline": row["roofline"]}
        )
        del w, b, a16, ref
        self.card.release()
        return row

    def best_and_shipped(self, row: dict) -> dict[str, dict]:
        timed = {c: smallm_table.mean_us(r["us"]) for c, r in row["results"].items() if r.get("us")}
        wanted: dict[str, dict] = {}
        if timed:
            best = min(timed, key=timed.__getitem__)
            wanted[best] = self.candidates[best]
            row["best"] = best
        shipped = smallm_table.candidate_of(self.table, row["rule_shipped"], self.tiles.check_config)
        row["rule_shipped_id"] = shipped
        if shipped is not None and row["results"][shipped]["bits"] == "equal":
            wanted[shipped] = self.candidates[shipped]
        return wanted

    def all_m(self, row: dict, a16, b, configs: dict[str, dict]) -> None:  # noqa: ANN001
        plans = {}
        if "cublas" not in row["all_m"]:
            plans["cublas"] = functools.partial(cublas, b=b)
            plans["first_route"] = functools.partial(self.first_route, b=b)
        for cid, config in configs.items():
            if cid not in row["all_m"]:
                plans[cid] = functools.partial(self.route.small_m_matmul, b=b, config=config)
        for name, fn in plans.items():
            row["all_m"][name] = self.times(fn, a16, self.all_ms)

    # --- the run ------------------------------------------------------------------------------------------

    def run(self, shapes: list[tuple[int, int, str]]) -> int:
        self.say(
            f"device {self.device['name']} sm{self.device['capability']}, {self.sm_count} SMs, L2 "
            f"{self.l2 >> 20} MiB, torch {self.device['torch']}, triton {self.device['triton']}; "
            f"{len(self.candidates)} candidates x {len(shapes)} shapes"
        )
        self.log({"stage": "start", "device": self.device, "candidates": len(self.candidates)})
        self.denominators()
        self.save_table()
        interrupted = False
        for n, k, source in shapes:
            try:
                row = self.shape(n, k, source)
            except KeyboardInterrupt:  # `timeout --signal=INT` in smallm_sweep.sh: keep what is done
                interrupted = True
                self.say(f"interrupted during ({n}, {k}); the table keeps the shapes before it")
                break
            except Exception as error:
                row = {"N": n, "K": k, "source": source, "error": traceback.format_exc()[-2000:]}
                self.say(f"({n}, {k}) FAILED: {type(error).__name__}: {error}")
            self.table["shapes"].append(row)
            self.save_table()
        try:
            self.refit(time_choices=not interrupted)
        except KeyboardInterrupt:
            interrupted = True
        self.table["complete"] = not interrupted and len(self.table["shapes"]) == len(shapes)
        self.table["elapsed_s"] = round(self.elapsed(), 1)
        self.save_table()
        summary = report(self.table, self.tiles)
        (self.out / "summary.txt").write_text(summary)
        print(summary, flush=True)
        self.say(f"table: {self.table_path}")
        return 0

    def refit(self, time_choices: bool = True) -> None:
        """Fit the rule to what was measured, then time its choices at every M where not done yet."""
        good = [s for s in self.table["shapes"] if "results" in s]
        if not good:
            return
        view = {**self.table, "shapes": good}
        try:
            fitted = smallm_table.fit_rule(view, self.tiles.check_config, self.tiles.is_small)
        except Exception as error:
            self.table["fit_error"] = f"{type(error).__name__}: {error}"
            return
        self.table["rule_fitted"] = fitted
        for row in good:
            config = self.tiles.choose(row["N"], row["K"], self.sm_count, self.l2, rule=fitted)
            cid = smallm_table.candidate_of(self.table, config, self.tiles.check_config)
            row["rule_fitted_id"] = cid
            if not time_choices or cid is None or cid in row["all_m"]:
                continue
            w, a16 = self.operands(row["N"], row["K"])
            self.all_m(row, a16, w.t(), {cid: self.candidates[cid]})
            del w, a16
            self.card.release()
        self.save_table()


def cublas(a, b):  # noqa: ANN001, ANN201
    """torch.matmul, the cuBLAS GEMM the issue compares with (a named function so `b` can be bound)."""
    import torch

    return torch.matmul(a, b)


def driver_version() -> str | None:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
        )
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
    except (OSError, IndexError):
        return None


# --- the printed summary (pure: reads the table) -----------------------------------------------------------


def pct(table: dict, shape: dict, us: float, m: int) -> float:
    nbytes = 2 * (shape["N"] * shape["K"] + m * shape["K"] + m * shape["N"])
    return 100 * nbytes / (us * 1e-6) / 1e9 / table["copy_gbps"][table["denominator"]]


def _cell(table: dict, shape: dict, times: dict | None, ms: list[int]) -> str:
    if not times or "error" in times:
        return "-"
    values = [times[str(m)] for m in ms if str(m) in times]
    if not values:
        return "-"
    us = sum(values) / len(values)
    lo = min(pct(table, shape, times[str(m)], m) for m in ms if str(m) in times)
    hi = max(pct(table, shape, times[str(m)], m) for m in ms if str(m) in times)
    span = f"{lo:.0f}" if round(lo) == round(hi) else f"{lo:.0f}-{hi:.0f}"
    return f"{us:7.1f} {span:>5}%"


def report(table: dict, tiles=None) -> str:  # noqa: ANN001
    lines = []
    device = table["device"]
    lines.append(
        f"small-M sweep, {device['name']} (sm{device['capability']}, {device['sm_count']} SMs, "
        f"L2 {device['l2_bytes'] >> 20} MiB), torch {device['torch']}, triton {device['triton']}, "
        f"{table['date']}"
    )
    copy = table["copy_gbps"][table["denominator"]]
    lines.append(f"denominator: eager device-to-device copy, 4 GiB, {copy:.0f} GB/s (read + write)")
    lines.append("columns: mean us over M = 1..16 and the %copy range; '*' = launch-bound (weights < 2 x L2)")
    names = ("cuBLAS", "first route", "shipped rule", "fitted rule", "best candidate")
    head = f"{'(N, K)':>15} {'MB':>5}  " + " ".join(f"{name:>14}" for name in names)
    lines.append(head + "  best id / references (%copy at M=0: sum, stream N, stream NxK)")
    failures = []
    for shape in table["shapes"]:
        if "results" not in shape:
            lines.append(f"({shape['N']}, {shape['K']}): FAILED, see the table's 'error'")
            continue
        allm = shape.get("all_m", {})
        star = " " if shape["large"] else "*"
        ms = table["all_ms"]
        cells = [
            _cell(table, shape, allm.get("cublas"), ms),
            _cell(table, shape, allm.get("first_route"), ms),
            _cell(table, shape, allm.get(shape.get("rule_shipped_id") or ""), ms),
            _cell(table, shape, allm.get(shape.get("rule_fitted_id") or ""), ms),
            _cell(table, shape, allm.get(shape.get("best") or ""), ms),
        ]
        roof = shape.get("roofline", {})
        references = "/".join(
            f"{pct(table, shape, roof[key], 0):.0f}" if isinstance(roof.get(key), float) else "-"
            for key in ("read_sum", "stream_n", "stream_nk")
        )
        name = f"({shape['N']}, {shape['K']})"
        lines.append(
            f"{name:>15}{star}{shape['weight_bytes'] / 1e6:5.0f}  "
            + " ".join(f"{c:>14}" for c in cells)
            + f"  {shape.get('best')} / {references}"
        )
        for cid, result in shape["results"].items():
            if result["bits"] != "equal" or result.get("timing_error"):
                failures.append(
                    f"({shape['N']}, {shape['K']}) {cid}: {result['bits']} {result.get('timing_error', '')}"
                )
    if failures:
        lines.append(f"\n{len(failures)} candidate results not usable (bits differ, error, or timing error):")
        lines += ["  " + f for f in failures[:60]]
        if len(failures) > 60:
            lines.append(f"  ... {len(failures) - 60} more in the table")
    else:
        lines.append("\nevery candidate kept the bits on every shape (M = 1..16 and every row alone)")
    if "rule_fitted" in table:
        lines.append("\nfitted rule (paste into small_m_tiles.RULE after review):")
        lines.append(smallm_table.rule_literal(intkeys(table["rule_fitted"])))
    elif "fit_error" in table:
        lines.append(f"\nfit failed: {table['fit_error']}")
    if tiles is not None:
        lines += check_lines(table, tiles)
        lines += target_card_lines(table, tiles)
    return "\n".join(lines) + "\n"


def check_lines(table: dict, tiles) -> list[str]:  # noqa: ANN001
    """What checks/offline/test_smallm_tiles.py will say of each rule once this table is committed."""
    rules = {"shipped": tiles.RULE}
    if "rule_fitted" in table:
        rules["fitted"] = intkeys(table["rule_fitted"])
    lines = []
    for name, rule in rules.items():
        try:
            rows = smallm_table.evaluate(
                table, functools.partial(tiles.choose, rule=rule), tiles.check_config
            )
        except smallm_table.TableError as error:
            lines.append(f"\n{name} rule: cannot be checked on this table ({error})")
            continue
        found = smallm_table.verdicts(rows)
        worst = max((r["regret"] for r in rows if r["large"]), default=float("nan"))
        cublas = max((r["vs_cublas"] for r in rows if r["large"]), default=float("nan"))
        lines.append(
            f"\n{name} rule on this table: worst regret {worst:.3f} and worst time / cuBLAS {cublas:.3f} on "
            f"shapes >= 2 x L2; the offline checks would report {len(found)} problem(s)"
        )
        lines += [f"  {f}" for f in found]
    return lines


def target_card_lines(table: dict, tiles) -> list[str]:  # noqa: ANN001
    """What the shipped and the fitted rule choose per shape here and on the recipe's card (pure)."""
    rules = {"shipped": tiles.RULE}
    if "rule_fitted" in table:
        rules["fitted"] = intkeys(table["rule_fitted"])
    device = table["device"]
    cards = {
        f"this card ({device['sm_count']} SMs, {device['l2_bytes'] >> 20} MiB)": (
            device["sm_count"],
            device["l2_bytes"],
        ),
        f"target ({TARGET_CARD[0]} SMs, {TARGET_CARD[1] >> 20} MiB)": TARGET_CARD,
    }
    lines = ["\nrule choices (config ids; the target card's are not measured here):"]
    for name, rule in rules.items():
        for card, (sms, l2) in cards.items():
            picks = []
            for shape in table["shapes"]:
                config = tiles.choose(shape["N"], shape["K"], sms, l2, rule=rule)
                full = tiles.check_config(config)
                cid = next(
                    (c for c, v in table["candidates"].items() if tiles.check_config(v) == full), str(full)
                )
                picks.append(f"({shape['N']}, {shape['K']}) {cid}")
            lines.append(f"  {name} rule, {card}:")
            lines += [f"    {p}" for p in picks]
    return lines


def intkeys(rule: dict) -> dict:
    """A rule read back from JSON, its width keys ints again."""
    return {**rule, "widths": {int(w): p for w, p in rule["widths"].items()}}


# --- precompiling in worker processes -----------------------------------------------------------------------


def compile_only(kernel_ids: str) -> int:
    """Worker: compile the named kernels (and 'first', the first route) into Triton's on-disk cache."""
    import smallm_reference
    import torch
    from sglang.srt.batch_invariant_ops import small_m_route

    kernels = {smallm_plan.kernel_id(k): k for k in smallm_plan.KERNELS}
    a = torch.randn((16, 1024), device="cuda").to(torch.bfloat16)
    w = torch.randn((256, 1024), device="cuda").to(torch.bfloat16)
    for kid in kernel_ids.split(","):
        try:
            if kid == "first":
                for n, k, _ in smallm_plan.SHAPES:  # its M and program-count specialisations
                    weight = torch.empty((n, k), device="cuda", dtype=torch.bfloat16)
                    act = torch.empty((16, k), device="cuda", dtype=torch.bfloat16)
                    for m in (1, 2, 16):
                        smallm_reference.first_route_matmul(act[:m], weight.t())
            elif kid == "stream":
                from lab.kernels.smallm_stream import stream_weights

                stream_weights(w, 1)
            else:
                small_m_route.small_m_matmul(a[:3], w.t(), config={**kernels[kid], "PROGRAMS_PER_SM": 1})
        except Exception as error:  # the main process compiles it again and records the error
            print(f"compile worker: {kid}: {type(error).__name__}: {str(error)[:200]}", file=sys.stderr)
    torch.cuda.synchronize()
    return 0


def precompile(workers: int) -> None:
    ids = ["first", "stream", *(smallm_plan.kernel_id(k) for k in smallm_plan.KERNELS)]
    if workers < 0:
        workers = max(1, min(8, (os.cpu_count() or 2) // 2))
    if workers <= 1:
        return
    groups = [ids[i::workers] for i in range(workers)]
    started = time.monotonic()
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "lab.kernels.bench_smallm_sweep", "--compile-only", ",".join(group)],
            cwd=HERE.parents[1],  # the repository root: the lab is a package there
            env=os.environ.copy(),
        )
        for group in groups
        if group
    ]
    for proc in procs:
        proc.wait()
    print(
        f"precompiled {len(ids)} kernels in {len(procs)} processes: {time.monotonic() - started:.1f}s",
        flush=True,
    )


def cuda_problem() -> str | None:
    """Why the sweep cannot run here, or None."""
    import importlib.util

    for module in ("torch", "triton"):
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed (the sweep needs torch and triton with CUDA)"
    import torch

    return None if torch.cuda.is_available() else "CUDA is not available (the sweep needs a CUDA card)"


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    problem = sglang_tree.install_from_env()
    if problem:
        print(problem, file=sys.stderr)
        return 2
    if args.compile_only is not None:
        return compile_only(args.compile_only)
    shapes = selected_shapes(args.shapes)
    if not args.interpret_cpu:
        problem = cuda_problem()
        if problem:
            print(f"bench_smallm_sweep: {problem}", file=sys.stderr)
            return 2
        precompile(args.compile_workers)
    return Sweep(args).run(shapes)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
