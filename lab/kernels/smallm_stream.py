"""A load-only reference for the small-M route: read a [N, K] bf16 weight as the route does, compute nothing.

Each work item reads [16, 256] TMA boxes of a strip of 16 weight rows, over the whole of K (`splits` = 1: the
route's order constraint, one program walks all of K for its columns) or over one of `splits` slices of K
(what splitting K, which the route may not do, would allow), and stores a checksum so nothing is optimised
away. It is a reference, not a bound: it shows what streaming the weights in this pattern costs without the
MMA, and what splitting K would buy; a tuned route candidate may beat it. Benchmark code only
(lab/kernels/bench_smallm_sweep.py); not part of the route.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

BLOCK_N, BLOCK_K, NUM_WARPS, NUM_STAGES = 16, 256, 4, 4


@triton.jit(do_not_specialize=["K_SPLIT", "NUM_ITEMS", "NUM_PROGRAMS"])
def _stream_kernel(
    w_desc,
    out_ptr,
    N,
    K,
    K_SPLIT,
    NUM_ITEMS,
    NUM_PROGRAMS,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    num_pid_n = tl.cdiv(N, BLOCK_N)
    for item in tl.range(tl.program_id(0), NUM_ITEMS, NUM_PROGRAMS):
        pid_n = item % num_pid_n
        split = item // num_pid_n
        acc = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
        k_lo = split * K_SPLIT
        k_hi = tl.minimum(k_lo + K_SPLIT, K)
        for k0 in range(k_lo, k_hi, BLOCK_K):
            acc += w_desc.load([pid_n * BLOCK_N, k0]).to(tl.float32)
        offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        tl.store(out_ptr + split * N + offs_n, tl.sum(acc, axis=1), mask=offs_n < N)


def stream_weights(weight: torch.Tensor, splits: int, out: torch.Tensor | None = None) -> torch.Tensor:
    """Read all of `weight` ([N, K], bf16, contiguous) in `splits` K slices per 16-row strip."""
    n, k = weight.shape
    k_split = triton.cdiv(triton.cdiv(k, splits), BLOCK_K) * BLOCK_K
    splits = triton.cdiv(k, k_split)
    if out is None:
        out = torch.empty((splits, n), device=weight.device, dtype=torch.float32)
    items = splits * triton.cdiv(n, BLOCK_N)
    _stream_kernel[(items,)](
        TensorDescriptor.from_tensor(weight, [BLOCK_N, BLOCK_K]),
        out,
        n,
        k,
        k_split,
        items,
        items,
        BLOCK_N=BLOCK_N,
        BLOCK_K=BLOCK_K,
        num_warps=NUM_WARPS,
        num_stages=NUM_STAGES,
    )
    return out
