"""The bit proof every GEMM route must pass, in one place: the GPU checks and the lab's sweep both call it.

A route `matmul(a)` passes against references `want[m]` (the result the route must reproduce for the first
m rows) when, for every m in `want`, `matmul(a[:m])` equals `want[m]` bit for bit, and every row computed
alone equals the same row inside the largest batch (batch invariance). torch is imported by the caller.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Tensor = Any  # torch.Tensor; typed loosely so that this module imports without torch


def describe(got: Tensor, want: Tensor) -> str:
    """Where two results differ: the first rows that do and the largest absolute difference."""
    diff = (got.float() - want.float()).abs()
    rows = sorted({int(r) for r in (diff > 0).nonzero()[:, 0].tolist()})
    shown = ", ".join(map(str, rows[:5])) + (", ..." if len(rows) > 5 else "")
    return f"rows {shown} differ ({len(rows)} of {got.shape[0]}), max abs diff {diff.max().item():.3g}"


def first_difference(matmul: Callable[[Tensor], Tensor], a: Tensor, want: Mapping[int, Tensor]) -> str | None:
    """None when `matmul` reproduces `want` at every M and is batch-invariant up to the largest M; else
    the first way it fails, in words."""
    import torch

    cap = max(want)
    full = matmul(a[:cap].contiguous())
    for m in sorted(want):
        got = full if m == cap else matmul(a[:m].contiguous())
        if not torch.equal(got, want[m]):
            return f"M={m}: {describe(got, want[m])}"
    for i in range(cap):
        if not torch.equal(matmul(a[i : i + 1].contiguous())[0], full[i]):
            return f"row {i} alone differs from row {i} at M={cap} (not batch-invariant)"
    return None
