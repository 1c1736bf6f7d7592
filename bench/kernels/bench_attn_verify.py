"""Benchmark: exact (decode-row) vs stock verify attention, GPU time per layer call.

Run on a CUDA card: `BITEXACT_SGLANG_TREE=<patched tree> python bench/kernels/bench_attn_verify.py`.
One full-attention layer of the assumed Qwen3.8-27B geometry (24/4 heads, head_dim 256), 8 draft
tokens, bf16 KV, context length 262144 (max_kv_splits 1024 as in serving). Each variant's
forward_extend is captured in a CUDA graph and replayed between L2 flushes; the per-forward metadata
build (init_forward_metadata, once per verify step for all layers) is timed the same way, separately.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parents[1] / "checks" / "gpu")]  # + checks/gpu (sglang_tree)

import sglang_tree  # noqa: E402

WIDTH = 8
CASES = [(1, 640), (1, 2200), (1, 131072), (4, 640), (4, 2200), (8, 2200)]


def measure(case, graph_time_us, event_time_us) -> dict:  # noqa: ANN001
    """GPU time of one layer's verify attention (graph replay) and of the per-step metadata refill
    that precedes a verify graph replay (eager, GPU timeline), stock and exact."""
    import functools

    import torch

    batch = case.verify_batch()
    row: dict = {}
    for name, backend in (("stock", case.stock), ("exact", case.backend)):
        backend.init_forward_metadata(batch)
        torch.cuda.synchronize()
        attend = functools.partial(
            backend.forward_extend, case.q, case.k_draft, case.v_draft, case.layer, batch
        )
        row[name] = graph_time_us(attend)
        backend.init_cuda_graph_state(case.bs, case.bs * case.width)
        refill = functools.partial(backend.init_forward_metadata_out_graph, batch, in_capture=False)
        row[f"meta_{name}"] = event_time_us(refill)
    return row


def main() -> int:
    problem = sglang_tree.install_from_env()
    if problem:
        print(problem, file=sys.stderr)
        return 2
    import attn_harness
    import torch
    import triton
    from gpu_timing import event_time_us, graph_time_us

    print(f"device {torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}")
    header = ("bs", "prefix", "stock us", "exact us", "ratio", "refill st", "refill ex")
    print("{:>3} {:>7} {:>9} {:>9} {:>6} {:>10} {:>10}".format(*header))
    results = []
    for bs, prefix in CASES:
        row = measure(attn_harness.make_case([prefix] * bs, WIDTH, seed=prefix), graph_time_us, event_time_us)
        row.update(bs=bs, prefix=prefix, ratio=row["exact"] / row["stock"])
        results.append(row)
        print(
            f"{bs:>3} {prefix:>7} {row['stock']:>9.1f} {row['exact']:>9.1f} {row['ratio']:>6.2f} "
            f"{row['meta_stock']:>10.1f} {row['meta_exact']:>10.1f}"
        )
        torch.cuda.empty_cache()
    out = os.environ.get("OUT")
    if out:
        Path(out, "bench_attn_verify.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
