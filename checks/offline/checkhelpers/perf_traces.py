"""Profiler traces for lab/perf/breakdown.py's tests: a real torch.profiler trace recorded on the CPU, with
GPU events added in the schema Kineto writes on a CUDA machine.

The CPU part is the real thing: `torch.profiler.profile(activities=[CPU])` around `record_function` spans
named as SGLang 0.5.20 names its forward steps (`srt/utils/profile_utils.py` `build_step_span_name`:
`step[DRAFT bs=1]`, `step[VERIFY bs=1]`, `step[DECODE bs=1]`), exported with `export_chrome_trace`. No GPU
is here, so the GPU events are added as Kineto writes them (pytorch/kineto `libkineto/src/output_json.cpp`
`handleActivity`, `CuptiActivity.cpp` `metadataJson`): launches are `cuda_runtime` / `cuda_driver` events
on the CPU thread with `args {"cbid", "correlation"}` (cbid 311 cudaGraphLaunch, 211 cudaLaunchKernel,
41 cudaMemcpyAsync, 652 cuLaunchKernelEx: CUPTI's cupti_runtime_cbid.h / cupti_driver_cbid.h); kernels are
`kernel` events with `pid` the device, `tid` the stream, and args `queued`, `device`, `context`,
`stream`, `correlation`, `registers per thread`, `shared memory`, `blocks per SM`, `warps per SM`, `grid`,
`block`, `est. achieved occupancy %`, and for a kernel replayed from a CUDA graph `graph id` /
`graph node id` with the correlation id of the `cudaGraphLaunch` that replayed it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile, record_function

ARGMAX = "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::ArgMaxOps<float>>>"
# One iteration of each server kind: (step kind or None for between steps, [(kernel name, us)]).
# Names as the kernels are called (sources in test_perf_breakdown.py's NAMES).
SPEC_ITERATION: list[tuple[str | None, list[tuple[str, float]]]] = [
    (
        "DRAFT",
        [
            ("matmul_kernel_persistent", 30.0),
            ("_fwd_grouped_kernel_stage1", 4.0),
            ("_fwd_kernel_stage2", 2.0),
            ("_rms_norm_kernel", 1.0),
        ],
    ),
    (
        "VERIFY",
        [
            ("matmul_kernel_persistent", 400.0),
            ("_exact_verify_recurrence_kernel", 50.0),
            ("_exact_verify_conv_kernel", 5.0),
            ("_rows_stage1", 20.0),
            ("_rows_stage2", 3.0),
            ("_rms_norm_kernel", 10.0),
        ],
    ),
    (
        None,
        [
            ("_fused_mamba_state_scatter_with_mask_kernel", 6.0),
            (ARGMAX, 2.0),
        ],
    ),
]
DECODE_ITERATION: list[tuple[str | None, list[tuple[str, float]]]] = [
    (
        "DECODE",
        [
            ("nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNT", 300.0),
            ("fused_recurrent_gated_delta_rule_packed_decode_kernel", 40.0),
            ("_fwd_grouped_kernel_stage1", 10.0),
            ("FusedAddRMSNormKernel", 8.0),
        ],
    ),
    (None, [("Memcpy DtoD (Device -> Device)", 1.0)]),
]


def cpu_trace(path: Path, iterations: int, steps: list[str]) -> dict[str, Any]:
    """Record `iterations` rounds of the named steps with the CPU profiler; some CPU work between rounds,
    so that kernels launched there fall between steps."""
    a = torch.ones(32, 32)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(iterations):
            for kind in steps:
                with record_function(f"step[{kind} bs=1]"):
                    a = (a @ a).clamp(max=1.0)
            a = a + 1.0  # bookkeeping between steps
    prof.export_chrome_trace(str(path))
    return json.loads(path.read_text())


def _kernel(name: str, ts: float, dur: float, corr: int, graph: int | None, node: int) -> dict[str, Any]:
    args: dict[str, Any] = {
        "queued": 0,
        "device": 0,
        "context": 1,
        "stream": 7,
        "correlation": corr,
        "registers per thread": 32,
        "shared memory": 0,
        "blocks per SM": 1.0,
        "warps per SM": 4.0,
        "grid": [132, 1, 1],
        "block": [128, 1, 1],
        "est. achieved occupancy %": 6,
    }
    if graph is not None:
        args.update({"graph id": graph, "graph node id": node})
    cat = "gpu_memcpy" if name.startswith("Memcpy") else "kernel"
    return {"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur, "args": args}


def _launcher(name: str) -> tuple[str, str, int]:
    """How an eager kernel is launched: Triton through the driver, ATen and cuBLAS kernels and copies at
    runtime."""
    if name.startswith("Memcpy"):
        return "cuda_runtime", "cudaMemcpyAsync", 41
    if name.startswith(("void ", "nvjet")):
        return "cuda_runtime", "cudaLaunchKernel", 211
    return "cuda_driver", "cuLaunchKernelEx", 652


def _eager(
    added: list[dict[str, Any]],
    name: str,
    dur: float,
    corr: int,
    at: tuple[Any, Any, float],
    gpu_clock: float,
) -> float:
    """An eager launch on the CPU thread (pid, tid) at time ts, and its kernel on the GPU no earlier than
    5 us after it; returns the GPU clock after the kernel."""
    pid, tid, ts = at
    cat, api, cbid = _launcher(name)
    added.append(
        {
            "ph": "X",
            "cat": cat,
            "name": api,
            "pid": pid,
            "tid": tid,
            "ts": ts,
            "dur": 0.01,
            "args": {"cbid": cbid, "correlation": corr},
        }
    )
    start = max(gpu_clock, ts + 5.0)
    added.append(_kernel(name, start, dur, corr, graph=None, node=0))
    return start + dur + 0.5


def add_gpu(
    trace: dict[str, Any], iteration: list[tuple[str | None, list[tuple[str, float]]]]
) -> dict[str, Any]:
    """Give every step span one cudaGraphLaunch replaying its kernels, and every gap after an iteration's
    last step eager launches of the between-steps kernels (cudaLaunchKernel, Triton's cuLaunchKernelEx)."""
    events = trace["traceEvents"]
    steps = sorted(
        (
            e
            for e in events
            if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith("step[")
        ),
        key=lambda e: e["ts"],
    )
    kinds = [k for k, _ in iteration if k is not None]
    kernels_of = dict(iteration)
    between = kernels_of.get(None, [])
    corr, gpu_clock, added = 1000, steps[0]["ts"] + 50.0, []
    for i, span in enumerate(steps):
        kind = span["name"][5:].split(" ")[0]
        pid, tid = span["pid"], span["tid"]
        corr += 1
        launch = span["ts"] + min(1.0, span["dur"] / 4)
        added.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaGraphLaunch",
                "pid": pid,
                "tid": tid,
                "ts": launch,
                "dur": 0.1,
                "args": {"cbid": 311, "correlation": corr},
            }
        )
        gpu_clock = max(gpu_clock, launch + 5.0)
        for node, (name, dur) in enumerate(kernels_of[kind]):
            added.append(_kernel(name, gpu_clock, dur, corr, graph=kinds.index(kind) + 1, node=node))
            gpu_clock += dur + 0.5
        last_of_iteration = kind == kinds[-1]
        if last_of_iteration and between:
            end = span["ts"] + span["dur"]
            nxt = steps[i + 1]["ts"] if i + 1 < len(steps) else end + 100.0
            for n, (name, dur) in enumerate(between):
                corr += 1
                t = end + (nxt - end) * (n + 1) / (len(between) + 1)
                gpu_clock = _eager(added, name, dur, corr, (pid, tid, t), gpu_clock)
    events.extend(added)
    return trace


def per_cycle(iteration: list[tuple[str | None, list[tuple[str, float]]]]) -> dict[str, float]:
    """Kernel time of one iteration by kernel name (what a complete cycle must add up to)."""
    out: dict[str, float] = {}
    for _, kernels in iteration:
        for name, dur in kernels:
            out[name] = out.get(name, 0.0) + dur
    return out


# One prefill chunk of a two-weight toy layer: (N, K) of each weight, and the GPU time its GEMM takes per
# output column (so that the two weights' totals differ and can be told apart).
PREFILL_WEIGHTS = ((48, 32), (32, 48))
PREFILL_OTHER = (("_fwd_kernel", 100.0), ("chunk_fwd_kernel_o", 50.0))


def prefill_cpu_trace(path: Path, chunks: int, tokens: int = 64) -> dict[str, Any]:
    """`chunks` extend steps of a toy layer, recorded with the CPU profiler and `record_shapes` (what
    run.py asks SGLang for): F.linear with a bias (aten::linear > aten::addmm) and without one
    (aten::linear > aten::matmul > aten::mm), so both innermost GEMM ops occur."""
    (n1, k1), (n2, k2) = PREFILL_WEIGHTS
    w1, b1, w2 = torch.ones(n1, k1), torch.ones(n1), torch.ones(n2, k2)
    x = torch.ones(tokens, k1)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for _ in range(chunks):
            with record_function(f"step[EXTEND bs=1 toks={tokens}]"):
                h = torch.nn.functional.linear(x, w1, b1).clamp(max=1.0)
                x = torch.nn.functional.linear(h, w2)
    prof.export_chrome_trace(str(path))
    return json.loads(path.read_text())


def add_prefill_gpu(trace: dict[str, Any], gemm_kernel: str, us_per_column: float) -> dict[str, Any]:
    """One eager launch in the middle of every innermost aten::addmm / aten::mm op (its GEMM kernel, taking
    N x us_per_column), and the attention and GDN kernels of PREFILL_OTHER launched at each step's start."""
    events = trace["traceEvents"]
    gemms = [e for e in events if e.get("cat") == "cpu_op" and e.get("name") in ("aten::addmm", "aten::mm")]
    steps = [
        e for e in events if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith("step[")
    ]
    launches: list[tuple[dict[str, Any], str, float]] = []
    for op in gemms:
        n = op["args"]["Input Dims"][2 if op["name"] == "aten::addmm" else 1][1]
        launches.append((op, gemm_kernel, n * us_per_column))
    for span in steps:
        for name, dur in PREFILL_OTHER:
            launches.append((span, name, dur))
    corr, gpu_clock, added = 5000, min(e["ts"] for e in steps), []
    for where, name, dur in sorted(launches, key=lambda item: item[0]["ts"]):
        corr += 1
        at = where["ts"] + (where["dur"] / 2 if where.get("cat") == "cpu_op" else 0.01)
        gpu_clock = _eager(added, name, dur, corr, (where["pid"], where["tid"], at), gpu_clock)
    events.extend(added)
    return trace
