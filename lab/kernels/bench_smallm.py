"""Benchmark: small-M route vs sglang's persistent Triton GEMM vs cuBLAS, as a fraction of DRAM bandwidth.

Run on a CUDA card: `BITEXACT_SGLANG_TREE=<patched tree> python -m lab.kernels.bench_smallm`.
The recipe's linear shapes (N, K), M = 1..16, bf16; each GEMM is captured in a CUDA graph and replayed
between L2 flushes. Bandwidth fraction = (weights + activations + output bytes) / time, against a
device-to-device copy measured in the same run. Shapes whose weights fit in L2 are launch-bound.
A second table times alternative route tile shapes at M = 16 (tuning evidence for _tile_config).
"""

from __future__ import annotations

import functools
import json
import os
import sys
from pathlib import Path

import sglang_tree

HERE = Path(__file__).resolve().parent

SHAPES = [(96, 5120), (5120, 6144), (5120, 17408), (14336, 5120)]
MS = list(range(1, 17))
SWEEP = [
    {"BLOCK_N": 16, "BLOCK_K": 256, "num_warps": 4, "num_stages": 4},
    {"BLOCK_N": 32, "BLOCK_K": 256, "num_warps": 4, "num_stages": 4},
    {"BLOCK_N": 32, "BLOCK_K": 256, "num_warps": 4, "num_stages": 6},
    {"BLOCK_N": 32, "BLOCK_K": 512, "num_warps": 4, "num_stages": 3},
    {"BLOCK_N": 32, "BLOCK_K": 128, "num_warps": 2, "num_stages": 8},
    {"BLOCK_N": 64, "BLOCK_K": 128, "num_warps": 4, "num_stages": 4},
    {"BLOCK_N": 64, "BLOCK_K": 128, "num_warps": 4, "num_stages": 6},
    {"BLOCK_N": 64, "BLOCK_K": 256, "num_warps": 4, "num_stages": 3},
    {"BLOCK_N": 64, "BLOCK_K": 256, "num_warps": 8, "num_stages": 4},
    {"BLOCK_N": 128, "BLOCK_K": 128, "num_warps": 4, "num_stages": 4},
]


def main() -> int:
    problem = sglang_tree.install_from_env()
    if problem:
        print(problem, file=sys.stderr)
        return 2
    import torch
    import triton
    from sglang.srt.batch_invariant_ops import batch_invariant_ops as bio
    from sglang.srt.batch_invariant_ops import small_m_route as route

    from lab.kernels.gpu_timing import dram_copy_gbps, dram_read_gbps, graph_time_us

    props = torch.cuda.get_device_properties(0)
    l2 = getattr(props, "L2_cache_size", 0)
    print(f"device {props.name}, L2 {l2 >> 20} MiB, torch {torch.__version__}, triton {triton.__version__}")
    copies = dram_copy_gbps()
    dram = max(copies.values())
    print("device-to-device copy, GB/s read + write: " + ", ".join(f"{k} {v:.0f}" for k, v in copies.items()))
    print(f"reference bandwidth for %BW below: {dram:.0f} GB/s (the best of the three)")
    read = dram_read_gbps()
    print(
        f"read-only reduction (torch.sum over 4 GB of bf16): {read:.0f} GB/s = {100 * read / dram:.0f}% of it"
    )
    results: dict = {"dram_gbps": dram, "read_gbps": read, "copies": copies, "rows": [], "sweep": []}
    gen = torch.Generator(device="cpu").manual_seed(0)
    for n, k in SHAPES:
        weight = torch.randn((n, k), generator=gen).mul_(k**-0.5).to(torch.bfloat16).cuda()
        b = weight.t()
        a_full = torch.randn((16, k), generator=gen).to(torch.bfloat16).cuda()
        bound = "launch-bound (weights fit in L2)" if n * k * 2 < l2 else "DRAM-bound"
        config = route._tile_config(n, k, *route._card(weight.device))  # what the route itself picks
        print(f"\n(N, K) = ({n}, {k}), weights {n * k * 2 / 1e6:.1f} MB, {bound}; route tiles {config}")
        print(
            f"{'M':>3} {'route us':>9} {'%BW':>5} {'persist us':>10} {'%BW':>5} {'cuBLAS us':>9} {'%BW':>5}"
        )
        for m in MS:
            a = a_full[:m].contiguous()
            nbytes = 2 * (n * k + m * k + m * n)
            row = {"N": n, "K": k, "M": m}
            for name, fn in (
                ("route", functools.partial(route.small_m_matmul, a, b)),
                ("persistent", functools.partial(bio._matmul_persistent_triton, a, b, torch.bfloat16)),
                ("cublas", functools.partial(torch.matmul, a, b)),
            ):
                us = graph_time_us(fn)
                row[name] = us
                row[f"{name}_bw"] = nbytes / (us * 1e-6) / 1e9 / dram
            results["rows"].append(row)
            print(
                f"{m:>3} {row['route']:>9.1f} {100 * row['route_bw']:>5.0f} {row['persistent']:>10.1f} "
                f"{100 * row['persistent_bw']:>5.0f} {row['cublas']:>9.1f} {100 * row['cublas_bw']:>5.0f}"
            )
    print("\nroute tile sweep at M = 16 (us, %BW)")
    for n, k in SHAPES[1:]:
        weight = torch.randn((n, k), generator=gen).to(torch.bfloat16).cuda()
        b = weight.t()
        a = torch.randn((16, k), generator=gen).to(torch.bfloat16).cuda()
        nbytes = 2 * (n * k + 16 * k + 16 * n)
        cells = []
        for cfg in SWEEP:
            us = graph_time_us(functools.partial(route.small_m_matmul, a, b, config=cfg))
            results["sweep"].append({"N": n, "K": k, **cfg, "us": us})
            cells.append(f"{us:.1f}/{100 * nbytes / (us * 1e-6) / 1e9 / dram:.0f}%")
        print(
            f"({n}, {k}): "
            + "  ".join(
                f"{c['BLOCK_N']}x{c['BLOCK_K']}w{c['num_warps']}s{c['num_stages']}={v}"
                for c, v in zip(SWEEP, cells, strict=True)
            )
        )
    out = os.environ.get("OUT")
    if out:
        Path(out, "bench_smallm.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
