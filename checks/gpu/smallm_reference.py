"""The small-M route as patch 0004 first shipped it (commit 8246d01): the bits every new config must keep.

Frozen here, outside the patch, so the route can change while its checks still compare against the kernel
whose K order the SM120 DeepGEMM equality test pins (checks/gpu/test_smallm_route.py). The kernel, the
tile rule and the launch (programs = min(tiles, 4 x SMs)) are that commit's, unchanged apart from names and
an optional SM count (for Triton's interpreter on a CPU, where there is no device to ask).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

BLOCK_M = 16


def first_route_config(n: int, k: int, sm_count: int) -> dict:
    """The first route's tile rule: the widest of 64/32 that still gives every SM a tile, else 16."""
    block_n = 16
    for candidate in (64, 32):
        if triton.cdiv(n, candidate) >= sm_count:
            block_n = candidate
            break
    if block_n == 64:
        return {"BLOCK_N": 64, "BLOCK_K": 128, "num_warps": 4, "num_stages": 4}
    return {"BLOCK_N": block_n, "BLOCK_K": 256 if k >= 256 else 64, "num_warps": 4, "num_stages": 4}


@triton.jit
def first_route_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_cm,
    stride_cn,
    NUM_PROGRAMS,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_tiles = tl.cdiv(M, BLOCK_M) * num_pid_n
    offs_k0 = tl.arange(0, BLOCK_K)
    for tile in tl.range(tl.program_id(0), num_tiles, NUM_PROGRAMS):
        pid_m = tile // num_pid_n
        pid_n = tile % num_pid_n
        offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        m_ok = offs_m < M  # rows past M load nothing: each row's sum never depends on the others
        a_rows = offs_m.to(tl.int64)
        b_cols = tl.where(offs_n < N, offs_n, 0).to(tl.int64)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            offs_k = k0 + offs_k0
            k_ok = offs_k < K
            a = tl.load(
                a_ptr + a_rows[:, None] * stride_am + offs_k[None, :] * stride_ak,
                mask=m_ok[:, None] & k_ok[None, :],
                other=0.0,
            )
            b = tl.load(
                b_ptr + offs_k[:, None] * stride_bk + b_cols[None, :] * stride_bn,
                mask=k_ok[:, None],
                other=0.0,
            )
            acc = tl.dot(a, b, acc)
        c_ptrs = c_ptr + offs_m.to(tl.int64)[:, None] * stride_cm + offs_n[None, :] * stride_cn
        tl.store(c_ptrs, acc.to(tl.bfloat16), mask=m_ok[:, None] & (offs_n[None, :] < N))


def first_route_matmul(a: torch.Tensor, b: torch.Tensor, sm_count: int | None = None) -> torch.Tensor:
    """`a @ b` in bf16 exactly as the first route computed it; `b` is [K, N] (a transposed [N, K] weight).
    `sm_count` defaults to the CUDA device's (given only under the Triton interpreter, on a CPU)."""
    M, K = a.shape
    N = b.shape[1]
    out = torch.empty((M, N), device=a.device, dtype=torch.bfloat16)
    if sm_count is None:
        sm_count = torch.cuda.get_device_properties(a.device).multi_processor_count
    cfg = first_route_config(N, K, sm_count)
    tiles = triton.cdiv(M, BLOCK_M) * triton.cdiv(N, cfg["BLOCK_N"])
    programs = max(1, min(tiles, 4 * sm_count))
    first_route_kernel[(programs,)](
        a,
        b,
        out,
        M,
        N,
        K,
        a.stride(0),
        a.stride(1),
        b.stride(0),
        b.stride(1),
        out.stride(0),
        out.stride(1),
        NUM_PROGRAMS=programs,
        BLOCK_M=BLOCK_M,
        **cfg,
    )
    return out
