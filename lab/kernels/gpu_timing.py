"""GPU time of a callable: captured once in a CUDA graph, replayed between L2 flushes, timed by events."""

from __future__ import annotations

import functools
import statistics
from collections.abc import Callable

import torch

_FLUSH_BYTES = 512 << 20  # several times the H200's 60 MB L2 (and the RTX PRO 6000's 128 MB)
_flush_buffer: torch.Tensor | None = None


def flush_l2() -> None:
    global _flush_buffer
    if _flush_buffer is None:
        _flush_buffer = torch.empty(_FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    _flush_buffer.fill_(1)


def graph_time_us(fn: Callable[[], object], iters: int = 30, warmup: int = 3) -> float:
    """Median GPU time of one replay of `fn` captured as a CUDA graph, L2 flushed before each replay."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream), torch.cuda.graph(graph, stream=stream):
        fn()
    torch.cuda.current_stream().wait_stream(stream)
    times = []
    for _ in range(iters):
        flush_l2()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000.0)
    return statistics.median(times)


def event_time_us(fn: Callable[[], object], iters: int = 20, warmup: int = 3) -> float:
    """Median GPU-timeline time of an eager call (launch gaps included), L2 flushed before each call."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        flush_l2()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000.0)
    return statistics.median(times)


def dram_copy_gbps(nbytes: int = 4 << 30) -> dict[str, float]:
    """Device-to-device copy bandwidth in GB/s, bytes read plus bytes written, three ways:
    a graph-captured memcpy, an eager memcpy, and an elementwise kernel (x * 1) over bf16."""
    src = torch.ones(nbytes // 2, dtype=torch.bfloat16, device="cuda")
    dst = torch.empty_like(src)
    copy = functools.partial(dst.copy_, src)
    rate = {
        "memcpy_graph": graph_time_us(copy, iters=10),
        "memcpy_eager": event_time_us(copy, iters=10),
        "kernel_eager": event_time_us(functools.partial(torch.mul, src, 1, out=dst), iters=10),
    }
    return {name: 2 * nbytes / (us * 1e-6) / 1e9 for name, us in rate.items()}


def dram_read_gbps(nbytes: int = 4 << 30) -> float:
    """Read-only bandwidth in GB/s: a full reduction over bf16 (what a small-M GEMM mostly does)."""
    src = torch.ones(nbytes // 2, dtype=torch.bfloat16, device="cuda")
    us = graph_time_us(functools.partial(torch.sum, src, dtype=torch.float32), iters=10)
    return nbytes / (us * 1e-6) / 1e9
