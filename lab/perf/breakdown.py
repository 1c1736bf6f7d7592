"""Where a server's GPU time goes per decode or speculative cycle, from a torch profiler trace (issue 11).

Input: the Chrome-trace JSON (`.json` or `.json.gz`) that `torch.profiler` writes through Kineto, as
SGLang's `/start_profile` produces it with activities CPU and GPU. What it relies on (Kineto's writer,
libkineto/src/output_json.cpp and CuptiActivity.cpp):
- GPU work: events of category `kernel` (also `gpu_memcpy`, `gpu_memset`) with `args.correlation`; a
  kernel replayed from a CUDA graph carries the correlation id of the `cudaGraphLaunch` that replayed it
  (and `graph id` / `graph node id`);
- launches: `cuda_runtime` events (`cudaLaunchKernel`, `cudaGraphLaunch`, ...) and `cuda_driver` events
  (`cuLaunchKernel`, `cuLaunchKernelEx`: Triton launches eagerly through the driver) on the CPU thread,
  with the same `args.correlation`;
- steps: SGLang 0.5.20 wraps every `ModelRunner.forward` in a `user_annotation` span named
  `step[DECODE bs=1]`, `step[VERIFY bs=1]` (target verify) or `step[DRAFT bs=1]` (any forward of the
  draft runner) (`srt/utils/profile_utils.py` `build_step_span_name`).

Each kernel is placed by its launch: in the step span that encloses the launch on its thread (or "between"
steps: sampling, acceptance, state commit), and in a cycle. Cycles run from one anchor step's start to the
next (anchor: VERIFY when the trace has verify steps, else DECODE), so a complete cycle holds one whole
speculative iteration (draft, verify and the bookkeeping around them) or one plain decode step; the partial
cycles at the window's edges are left out. Kernel names are sorted into GEMM / GDN / attention / rest by the
rules in RULES (first match wins; docs/performance.md lists them with the real kernel names they were taken
from). The small-M route (sm120 only) is reported on its own line: on the H200 its count must be 0, and
the exact GEMMs are the batch-invariant persistent Triton kernel instead.

Standard library only. Usage:
    python -m lab.perf.breakdown TRACE.json.gz [--anchor VERIFY] [--json OUT.json] [--markdown OUT.md]
"""

from __future__ import annotations

import argparse
import bisect
import functools
import gzip
import json
import re
import statistics
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

COMPONENTS = ("gemm", "gdn", "attention", "rest")
GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
LAUNCH_CATEGORIES = ("cuda_runtime", "cuda_driver")
STEP = re.compile(r"^step\[([A-Z_]+) bs=(\d+)")
SMALL_M_LABEL = "small-M route (sm120 only)"
EXACT_GEMM_LABEL = "exact GEMM route (patch 0005)"


class TraceError(ValueError):
    """The trace cannot be analysed; the message says what is missing and how to record it."""


@dataclass(frozen=True)
class Rule:
    component: str
    label: str
    pattern: re.Pattern[str]


def _rule(component: str, label: str, pattern: str) -> Rule:
    return Rule(component, label, re.compile(pattern))


# Order matters: specific families first, the generic GEMM words last (FlashAttention's names contain
# `cutlass`, and nothing of GDN or attention is called gemm).
RULES: tuple[Rule, ...] = (
    _rule("gemm", SMALL_M_LABEL, r"^_small_m_gemm(_tma)?_kernel$"),
    _rule("gemm", EXACT_GEMM_LABEL, r"^_exact_gemm(_tma)?_kernel$"),
    _rule("gemm", "persistent Triton (batch-invariant)", r"^(matmul|bmm)_kernel_persistent$"),
    _rule("gemm", "DeepGEMM", r"deep_gemm::|_bf16_gemm_impl"),
    _rule(
        "gdn",
        "GDN gating, norm and chunked prefill",
        r"fused_gdn_gating|gdn_prefill|^chunk_(gated_delta|fwd_kernel_o|local_cumsum|scaled_dot_kkt)"
        r"|solve_tril|recompute_w_u|^l2norm_fwd|layer_norm_gated|^_layer_norm_fwd_1pass_kernel$",
    ),
    _rule(
        "gdn",
        "GDN recurrence",
        r"gated_delta_rule|delta_rule_update|^_exact_verify_recurrence_kernel$",
    ),
    _rule("gdn", "GDN conv and projection split", r"causal_conv1d|^_exact_verify_conv_kernel$|qkvzba"),
    _rule(
        "gdn", "GDN state commit and tracking", r"mamba_state|conv_window|track_mamba|_replay_state_indices"
    ),
    _rule(
        "attention",
        "Triton attention (decode, extend, verify rows)",
        r"^_fwd_(grouped_)?kernel_stage[12]$|^(_shared)?_rows_stage[12]$|^_fwd_kernel(_unified|_dense_prefill)?$"
        r"|^_verify_(prefix_stage1|combine_stage2)$|^merge_state_kernel$|^_copy_unified_indices_kernel$",
    ),
    _rule("attention", "FlashAttention", r"flash::"),
    _rule("attention", "RoPE", r"(?i)(^|[^a-z])rope|rotary"),
    _rule(
        "attention",
        "KV-cache store and indices",
        r"set_kv_buffer|store_cache|reshape_and_cache|kv_indices",
    ),
    _rule("gemm", "cuBLAS / CUTLASS", r"nvjet|(?i:gemm|gemv)|splitKreduce|cublas|cutlass|xmma"),
    _rule("rest", "norms", r"(?i)rms_?norm|layer_?norm|_norm_kernel"),
    _rule("rest", "activation", r"act_and_mul|silu|gelu"),
    _rule("rest", "sampling and logits", r"(?i)argmax|sampl|topk|top_k|softmax"),
)


@functools.cache  # a trace has thousands of launches of a few dozen kernels
def classify(name: str) -> tuple[str, str]:
    """(component, label) of a kernel name."""
    for rule in RULES:
        if rule.pattern.search(name):
            return rule.component, rule.label
    return "rest", "other (elementwise, copies, ...)"


@dataclass
class Span:
    kind: str
    start: float
    end: float


@dataclass
class GpuEvent:
    name: str
    start: float
    dur: float
    component: str
    label: str
    launch: float | None  # CPU timestamp of the launch, when the trace has it
    step: str | None  # enclosing step span's kind, None between steps
    thread: tuple[Any, Any] | None = None  # (pid, tid) of the launch, when the trace has it
    grid: str = ""  # the launch grid as "XxYxZ" (Kineto's args.grid), "" when absent


def load_events(path: Path) -> list[dict[str, Any]]:
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, json.JSONDecodeError) as error:
        raise TraceError(f"{path}: not a readable Chrome trace ({error})") from None
    events = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(events, list):
        raise TraceError(f"{path}: no traceEvents list (is this a torch profiler trace?)")
    return [e for e in events if isinstance(e, dict)]


def _steps(events: list[dict[str, Any]]) -> dict[tuple[Any, Any], list[Span]]:
    spans: dict[tuple[Any, Any], list[Span]] = defaultdict(list)
    for e in events:
        if e.get("cat") != "user_annotation" or e.get("ph") != "X":
            continue
        match = STEP.match(str(e.get("name", "")))
        if match:
            start = float(e["ts"])
            spans[(e.get("pid"), e.get("tid"))].append(Span(match.group(1), start, start + float(e["dur"])))
    for thread in spans.values():
        thread.sort(key=lambda s: s.start)
    return spans


class Interval(Protocol):
    @property
    def start(self) -> float: ...

    @property
    def end(self) -> float: ...


Inner = TypeVar("Inner", bound=Interval)


def enclosing(thread: list[Inner], starts: list[float], ts: float) -> Inner | None:
    """The innermost interval of one thread (sorted by start, `starts` their starts) that contains ts:
    intervals of one thread nest or follow, so the last one started that still runs at ts."""
    i = bisect.bisect_right(starts, ts) - 1
    while i >= 0:
        if thread[i].end >= ts:
            return thread[i]
        i -= 1
    return None


def gpu_events(events: list[dict[str, Any]]) -> tuple[list[GpuEvent], dict[tuple[Any, Any], list[Span]]]:
    launches: dict[Any, tuple[Any, Any, float]] = {}
    for e in events:
        if e.get("cat") in LAUNCH_CATEGORIES and isinstance(e.get("args"), dict):
            corr = e["args"].get("correlation")
            if corr is not None:
                launches[corr] = (e.get("pid"), e.get("tid"), float(e["ts"]))
    spans = _steps(events)
    starts = {key: [s.start for s in thread] for key, thread in spans.items()}
    out = []
    for e in events:
        if e.get("cat") not in GPU_CATEGORIES or e.get("ph") != "X":
            continue
        name = str(e.get("name", ""))
        component, label = classify(name)
        corr = (e.get("args") or {}).get("correlation")
        launch = launches.get(corr) if corr is not None else None
        step = None
        if launch is not None:
            key = (launch[0], launch[1])
            span = enclosing(spans[key], starts[key], launch[2]) if key in spans else None
            step = span.kind if span else None
        out.append(
            GpuEvent(
                name=name,
                start=float(e["ts"]),
                dur=float(e.get("dur", 0.0)),
                component=component,
                label=label,
                launch=launch[2] if launch else None,
                step=step,
                thread=(launch[0], launch[1]) if launch else None,
                grid="x".join(str(v) for v in (e.get("args") or {}).get("grid", [])),
            )
        )
    return out, spans


def busy(intervals: list[tuple[float, float]]) -> float:
    """Length of the union of intervals (time with at least one kernel running)."""
    total, end = 0.0, float("-inf")
    for start, stop in sorted(intervals):
        if start > end:
            total += stop - start
            end = stop
        elif stop > end:
            total += stop - end
            end = stop
    return total


def analyse(events: list[dict[str, Any]], anchor: str | None = None, source: str = "") -> dict[str, Any]:
    gpu, spans = gpu_events(events)
    if not gpu:
        raise TraceError(
            f"{source}: no GPU kernel events: record with activities CPU and GPU (SGLang's /start_profile "
            '{"activities": ["CPU", "GPU"]})'
        )
    kinds = sorted({s.kind for thread in spans.values() for s in thread})
    if not kinds:
        raise TraceError(
            f"{source}: no step[...] spans: record with the CPU activity on (SGLang names each forward "
            "step[MODE bs=N] only while the torch profiler records CPU events)"
        )
    anchor = anchor or ("VERIFY" if "VERIFY" in kinds else "DECODE" if "DECODE" in kinds else None)
    if anchor is None or anchor not in kinds:
        raise TraceError(
            f"{source}: no {anchor or 'VERIFY or DECODE'} steps to anchor cycles on; steps: {kinds}"
        )
    bounds = sorted(s.start for thread in spans.values() for s in thread if s.kind == anchor)
    if len(bounds) < 2:
        raise TraceError(f"{source}: one {anchor} step only: profile more steps to get a whole cycle")
    cycles: list[list[GpuEvent]] = [[] for _ in range(len(bounds) - 1)]
    unattributed: list[GpuEvent] = []
    edges = 0
    for g in gpu:
        if g.launch is None:
            unattributed.append(g)
            continue
        i = bisect.bisect_right(bounds, g.launch) - 1
        if 0 <= i < len(cycles):
            cycles[i].append(g)
        else:
            edges += 1
    per_cycle = [_cycle_totals(c) for c in cycles]
    for i, totals in enumerate(per_cycle):
        totals["steps"] = {
            kind: sum(
                1
                for thread in spans.values()
                for s in thread
                if s.kind == kind and bounds[i] <= s.start < bounds[i + 1]
            )
            for kind in kinds
        }
    n = len(per_cycle)
    result: dict[str, Any] = {
        "source": source,
        "anchor": anchor,
        "step_kinds": kinds,
        "cycles": n,
        "steps_per_cycle": {k: _mean([c["steps"].get(k, 0) for c in per_cycle]) for k in kinds},
        "per_cycle_us": {
            key: _mean([c[key] for c in per_cycle]) for key in (*COMPONENTS, "total", "busy", "span")
        },
        "total_us_median": statistics.median(c["total"] for c in per_cycle),
        "total_us_min_max": [min(c["total"] for c in per_cycle), max(c["total"] for c in per_cycle)],
        "by_step_us": {
            step: {
                comp: _mean([c["by_step"].get(step, {}).get(comp, 0.0) for c in per_cycle])
                for comp in COMPONENTS
            }
            for step in (*kinds, "between")
        },
        "by_label_us": _mean_map([c["by_label"] for c in per_cycle]),
        "small_m_route": {
            "kernels_per_cycle": _mean([c["small_m_count"] for c in per_cycle]),
            "us_per_cycle": _mean([c["by_label"].get(SMALL_M_LABEL, 0.0) for c in per_cycle]),
        },
        "top_kernels": _top(cycles, n),
        "left_out": {"edge_kernels": edges, "unattributed_kernels": len(unattributed)},
    }
    return result


def _cycle_totals(cycle: list[GpuEvent]) -> dict[str, Any]:
    totals: dict[str, Any] = {comp: 0.0 for comp in COMPONENTS}
    by_step: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    by_label: dict[str, float] = defaultdict(float)
    for g in cycle:
        totals[g.component] += g.dur
        by_step[g.step or "between"][g.component] += g.dur
        by_label[g.label] += g.dur
    totals["total"] = sum(totals[comp] for comp in COMPONENTS)
    totals["busy"] = busy([(g.start, g.start + g.dur) for g in cycle])
    totals["span"] = (max(g.start + g.dur for g in cycle) - min(g.start for g in cycle)) if cycle else 0.0
    totals["by_step"] = by_step
    totals["by_label"] = by_label
    totals["small_m_count"] = sum(1 for g in cycle if g.label == SMALL_M_LABEL)
    return totals


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _mean_map(maps: list[dict[str, float]]) -> dict[str, float]:
    keys = sorted({k for m in maps for k in m})
    return {k: _mean([m.get(k, 0.0) for m in maps]) for k in keys}


def _top(cycles: list[list[GpuEvent]], n: int, limit: int = 25) -> list[dict[str, Any]]:
    time: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    for cycle in cycles:
        for g in cycle:
            time[g.name] += g.dur
            count[g.name] += 1
    rows = []
    for name in sorted(time, key=lambda k: -time[k])[:limit]:
        component, label = classify(name)
        rows.append(
            {
                "name": name,
                "component": component,
                "label": label,
                "us_per_cycle": time[name] / n,
                "launches_per_cycle": count[name] / n,
            }
        )
    return rows


def markdown(result: dict[str, Any], title: str = "") -> str:
    us = result["per_cycle_us"]
    lines = [
        f"### {title or result['source']}",
        "",
        f"{result['cycles']} complete cycles anchored on {result['anchor']} steps (step kinds in the trace: "
        f"{', '.join(result['step_kinds'])}); GPU kernel time per cycle, mean, us.",
        "",
        "| component | " + " | ".join(["all", *result["step_kinds"], "between steps"]) + " |",
        "|---|" + "---:|" * (2 + len(result["step_kinds"])),
    ]
    for comp in COMPONENTS:
        cells = [f"{us[comp]:.1f}"] + [
            f"{result['by_step_us'][k][comp]:.1f}" for k in (*result["step_kinds"], "between")
        ]
        lines.append(f"| {comp} | " + " | ".join(cells) + " |")
    lines += [
        f"| **total** | **{us['total']:.1f}** | "
        + " | ".join(
            f"{sum(result['by_step_us'][k].values()):.1f}" for k in (*result["step_kinds"], "between")
        )
        + " |",
        "",
        f"GPU busy {us['busy']:.1f} us, first kernel start to last kernel end {us['span']:.1f} us per cycle; "
        f"total per cycle median {result['total_us_median']:.1f} us "
        f"(min {result['total_us_min_max'][0]:.1f}, max {result['total_us_min_max'][1]:.1f}).",
        f"Small-M route: {result['small_m_route']['kernels_per_cycle']:.1f} kernels, "
        f"{result['small_m_route']['us_per_cycle']:.1f} us per cycle.",
        "",
        "| kernel family | us per cycle |",
        "|---|---:|",
        *[
            f"| {label} | {value:.1f} |"
            for label, value in sorted(result["by_label_us"].items(), key=lambda kv: -kv[1])
        ],
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace", type=Path)
    parser.add_argument("--anchor", help="step kind that starts a cycle (default VERIFY, else DECODE)")
    parser.add_argument("--json", type=Path, help="write the result as JSON here")
    parser.add_argument("--markdown", type=Path, help="write the tables as markdown here")
    args = parser.parse_args(argv)
    try:
        result = analyse(load_events(args.trace), args.anchor, source=args.trace.name)
    except TraceError as error:
        print(f"breakdown: {error}", file=sys.stderr)
        return 2
    emit(result, markdown(result), args.json, args.markdown)
    return 0


def emit(result: dict[str, Any], text: str, json_path: Path | None, markdown_path: Path | None) -> None:
    """A command's result: JSON and markdown files where asked, the markdown on stdout."""
    if json_path:
        json_path.write_text(json.dumps(result, indent=1) + "\n")
    if markdown_path:
        markdown_path.write_text(text)
    print(text, end="")


if __name__ == "__main__":
    sys.exit(main())
