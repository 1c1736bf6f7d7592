"""GPU time of a callable: captured once in a CUDA graph, replayed between L2 flushes, timed by events."""

from __future__ import annotations

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


def dram_copy_gbps(nbytes: int = 2 << 30, iters: int = 20) -> float:
    """Device-to-device copy bandwidth, counting bytes read plus bytes written (GB/s)."""
    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    src.fill_(3)
    us = graph_time_us(lambda: dst.copy_(src), iters=iters)
    return 2 * nbytes / (us * 1e-6) / 1e9
