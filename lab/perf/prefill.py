"""Where a server's GPU time goes while it prefills one prompt, GEMM by GEMM (issue 18, part 2).

Input: a torch profiler trace of one whole prefill (lab/perf/run.py records it: SGLang's
`/start_profile` with activities CPU and GPU and `record_shapes`, one request with max_new_tokens 1, then
`/stop_profile`). Every GPU kernel of the trace counts: the window holds that request alone.

GEMM shapes come from the CPU side. With `record_shapes` each ATen op event (category `cpu_op`) carries
`args["Input Dims"]` (torch's profiler_kineto.cpp; seen in a real CPU trace by
lab/tests/test_perf_prefill.py). A GEMM kernel is put under the innermost matrix-product op that
encloses its launch on the launching thread: stock's cuBLAS kernels under `aten::addmm`/`aten::mm`,
and the exact route's Triton kernels too, since SGLang's batch-invariant mode registers its Triton
matmul as the CUDA implementation of `aten::mm`/`aten::addmm` (0.5.20
`srt/batch_invariant_ops/batch_invariant_ops.py`), so the dispatcher's op event still encloses them.
The shape is (M, N, K) of that op; weights are grouped by (N, K), the M of each call kept.

SGLang 0.5.20 replays prefill chunks from piecewise CUDA graphs, so most prefill GEMMs are launched by a
`cudaGraphLaunch` with no op around them (seen on the H200: 1521 of 1525 GEMM kernels of a 32768-token
prefill, both trees). For those the comparison pairs the two traces' GEMM kernels by their order on
the GPU (the same model runs the same products in the same order in both trees; a cuBLAS split-K
reduction counts with the product it finishes) and groups the pairs by
the exact kernel's name and grid: at one M the exact route's grid is its tile count,
ceil(M / BLOCK_M) x ceil(N / BLOCK_N), which tells the weights apart (docs/performance.md maps them).

Standard library only. Usage:
    python -m lab.perf.prefill TRACE.json.gz [--json OUT.json] [--markdown OUT.md]
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.perf import breakdown

# Matrix products whose shapes name a GEMM; the innermost enclosing one wins (aten::linear wraps addmm).
GEMM_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear")
TOKENS = re.compile(r"^step\[EXTEND bs=\d+ toks=(\d+)")  # the target's chunks, not the drafter's
NO_SHAPE = "no enclosing matrix-product op"


@dataclass(frozen=True)
class Op:
    name: str
    start: float
    end: float
    dims: tuple[tuple[int, ...], ...]


def gemm_shape(name: str, dims: tuple[tuple[int, ...], ...]) -> tuple[int, int, int] | None:
    """(M, N, K) of one matrix-product op from its input dims, None when they do not say."""
    try:
        if name == "aten::mm":
            (m, k), (_, n) = dims[0], dims[1]
        elif name == "aten::addmm":
            (m, k), (_, n) = dims[1], dims[2]
        elif name in ("aten::bmm", "aten::baddbmm"):
            a, b = (dims[0], dims[1]) if name == "aten::bmm" else (dims[1], dims[2])
            m, k, n = a[0] * a[1], a[2], b[2]  # batch folded into M
        elif name == "aten::linear":
            x, w = dims[0], dims[1]
            m, k, n = math.prod(x[:-1]), x[-1], w[0]
        else:  # aten::matmul with a 2-D right operand
            x, w = dims[0], dims[1]
            if len(w) != 2:
                return None
            m, k, n = math.prod(x[:-1]), x[-1], w[1]
    except (IndexError, ValueError, TypeError):
        return None
    return int(m), int(n), int(k)


def _gemm_ops(events: list[dict[str, Any]]) -> dict[tuple[Any, Any], list[Op]]:
    ops: dict[tuple[Any, Any], list[Op]] = defaultdict(list)
    for e in events:
        if e.get("cat") != "cpu_op" or e.get("ph") != "X" or e.get("name") not in GEMM_OPS:
            continue
        raw = (e.get("args") or {}).get("Input Dims")
        if not isinstance(raw, list):
            continue
        dims = tuple(tuple(int(d) for d in dim) for dim in raw if isinstance(dim, list))
        start = float(e["ts"])
        ops[(e.get("pid"), e.get("tid"))].append(Op(str(e["name"]), start, start + float(e["dur"]), dims))
    for thread in ops.values():
        thread.sort(key=lambda o: o.start)
    return ops


def analyse(events: list[dict[str, Any]], source: str = "") -> dict[str, Any]:
    gpu, spans = breakdown.gpu_events(events)
    if not gpu:
        raise breakdown.TraceError(
            f"{source}: no GPU kernel events: record with activities CPU and GPU (SGLang's /start_profile "
            '{"activities": ["CPU", "GPU"], "record_shapes": true})'
        )
    steps = [s for thread in spans.values() for s in thread]
    extend_tokens = [
        int(m.group(1))
        for e in events
        if e.get("cat") == "user_annotation" and (m := TOKENS.match(str(e.get("name", ""))))
    ]
    ops = _gemm_ops(events)
    if not ops:
        raise breakdown.TraceError(
            f"{source}: no matrix-product ops with input dims: record with "
            '"record_shapes": true (SGLang\'s /start_profile) so that GEMMs can be told apart'
        )
    starts = {key: [o.start for o in thread] for key, thread in ops.items()}
    by_component: dict[str, float] = defaultdict(float)
    by_label: dict[str, float] = defaultdict(float)
    by_step: dict[str, float] = defaultdict(float)
    shapes: dict[str, dict[str, Any]] = {}
    for g in gpu:
        by_component[g.component] += g.dur
        by_label[g.label] += g.dur
        by_step[g.step or "between"] += g.dur
        if g.component != "gemm":
            continue
        op = None
        if g.thread in ops and g.launch is not None:
            op = breakdown.enclosing(ops[g.thread], starts[g.thread], g.launch)
        shape = gemm_shape(op.name, op.dims) if op else None
        key = f"N={shape[1]} K={shape[2]}" if shape else NO_SHAPE
        row = shapes.setdefault(key, {"us": 0.0, "kernels": 0, "m": {}, "labels": {}})
        row["us"] += g.dur
        row["kernels"] += 1
        if shape:
            row["m"][str(shape[0])] = row["m"].get(str(shape[0]), 0) + 1
        row["labels"][g.label] = row["labels"].get(g.label, 0.0) + g.dur
    sequence: list[list[Any]] = []
    for g in sorted((g for g in gpu if g.component == "gemm"), key=lambda g: g.start):
        if "splitKreduce" in g.name and sequence:  # cuBLAS's second pass of the product before it
            sequence[-1][2] += g.dur
            continue
        sequence.append([g.name, g.grid, g.dur])
    first = min(g.start for g in gpu)
    last = max(g.start + g.dur for g in gpu)
    return {
        "source": source,
        "steps": {kind: sum(1 for s in steps if s.kind == kind) for kind in sorted({s.kind for s in steps})},
        "extend_tokens": extend_tokens,
        "us": {
            **{c: by_component.get(c, 0.0) for c in breakdown.COMPONENTS},
            "total": sum(by_component.values()),
            "busy": breakdown.busy([(g.start, g.start + g.dur) for g in gpu]),
            "span": last - first,
        },
        "by_label_us": dict(sorted(by_label.items(), key=lambda kv: -kv[1])),
        "by_step_us": dict(by_step),
        "gemm_by_weight": dict(sorted(shapes.items(), key=lambda kv: -kv[1]["us"])),
        "gemm_sequence": sequence,
    }


def markdown(result: dict[str, Any], title: str = "") -> str:
    us = result["us"]
    tokens = result["extend_tokens"]
    lines = [
        f"### {title or result['source']}",
        "",
        f"One prefill: steps {', '.join(f'{k} x{v}' for k, v in result['steps'].items()) or 'none'}"
        + (f" (extend chunks of {', '.join(map(str, tokens))} tokens)" if tokens else "")
        + f"; GPU kernel time {us['total'] / 1000:.1f} ms, busy {us['busy'] / 1000:.1f} ms, first kernel "
        f"to last {us['span'] / 1000:.1f} ms.",
        "",
        "| component | ms |",
        "|---|---:|",
        *[f"| {c} | {us[c] / 1000:.1f} |" for c in breakdown.COMPONENTS],
        "",
        "| kernel family | ms |",
        "|---|---:|",
        *[f"| {label} | {v / 1000:.1f} |" for label, v in result["by_label_us"].items()],
        "",
        "| GEMM weight | ms | kernels | M (calls) |",
        "|---|---:|---:|---|",
        *[
            f"| {key} | {row['us'] / 1000:.1f} | {row['kernels']} | "
            + ", ".join(f"{m} ({n})" for m, n in sorted(row["m"].items(), key=lambda kv: -int(kv[0])))
            + " |"
            for key, row in result["gemm_by_weight"].items()
        ],
    ]
    return "\n".join(lines) + "\n"


def compare(exact: dict[str, Any], stock: dict[str, Any], names: tuple[str, str]) -> str:
    """Exact against stock, weight by weight and component by component, for one prefill of each."""
    lines = [
        f"| GEMM weight | {names[0]} ms | {names[1]} ms | ratio |",
        "|---|---:|---:|---:|",
    ]
    keys = sorted(
        set(exact["gemm_by_weight"]) | set(stock["gemm_by_weight"]),
        key=lambda k: -stock["gemm_by_weight"].get(k, {}).get("us", 0.0),
    )
    for key in keys:
        e = exact["gemm_by_weight"].get(key, {}).get("us", 0.0)
        s = stock["gemm_by_weight"].get(key, {}).get("us", 0.0)
        lines.append(f"| {key} | {e / 1000:.1f} | {s / 1000:.1f} | {_ratio(e, s)} |")
    for c in (*breakdown.COMPONENTS, "total", "busy"):
        e, s = exact["us"][c], stock["us"][c]
        lines.append(f"| **{c}** | {e / 1000:.1f} | {s / 1000:.1f} | {_ratio(e, s)} |")
    return "\n".join(lines) + "\n\n" + aligned(exact, stock, names)


def aligned(exact: dict[str, Any], stock: dict[str, Any], names: tuple[str, str]) -> str:
    """The two traces' GEMM kernels paired in GPU order, grouped by the exact kernel's name and grid."""
    a, b = exact.get("gemm_sequence", []), stock.get("gemm_sequence", [])
    if not a or len(a) != len(b):
        return (
            f"GEMM kernels paired in GPU order: not possible ({len(a)} in {names[0]}, {len(b)} in "
            f"{names[1]}: the two ran different products).\n"
        )
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for (name, grid, e_us), (stock_name, _, s_us) in zip(a, b, strict=True):
        row = groups.setdefault((name, grid), {"n": 0, "e": 0.0, "s": 0.0, "stock": defaultdict(int)})
        row["n"] += 1
        row["e"] += e_us
        row["s"] += s_us
        row["stock"][stock_name] += 1
    lines = [
        f"GEMM kernels paired in GPU order ({len(a)} in each), grouped by {names[0]}'s kernel and grid:",
        "",
        f"| {names[0]} kernel | grid | kernels | {names[0]} ms | {names[1]} ms | ratio "
        f"| {names[1]} kernels |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for (name, grid), row in sorted(groups.items(), key=lambda kv: -kv[1]["s"]):
        top = sorted(row["stock"].items(), key=lambda kv: -kv[1])
        shown = ", ".join(f"{k} ({v})" for k, v in top[:2]) + (
            f", {len(top) - 2} more" if len(top) > 2 else ""
        )
        lines.append(
            f"| {name} | {grid} | {row['n']} | {row['e'] / 1000:.1f} | {row['s'] / 1000:.1f} | "
            f"{_ratio(row['e'], row['s'])} | {shown} |"
        )
    return "\n".join(lines) + "\n"


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if b else "-"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace", type=Path)
    parser.add_argument("--json", type=Path, help="write the result as JSON here")
    parser.add_argument("--markdown", type=Path, help="write the tables as markdown here")
    args = parser.parse_args(argv)
    try:
        result = analyse(breakdown.load_events(args.trace), source=args.trace.name)
    except breakdown.TraceError as error:
        print(f"prefill: {error}", file=sys.stderr)
        return 2
    breakdown.emit(result, markdown(result), args.json, args.markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
