"""GPU time of one GDN layer's target verify: exact (patch 0002) vs stock, and vs T decode steps.

Each variant is the backend method itself (`GDNAttnBackend.forward_extend` for verify, T calls of
`forward_decode` through the fused projection+conv path for decode) captured in a CUDA graph, timed
with CUDA events around `graph.replay()`: "cold" flushes the L2 (a 512 MiB write) before every
replay and times replays one by one, as a model with 48 GDN layers meets its states; "hot" times
back-to-back replays. Geometry and rig: the kernel checks' (checks/gpu/gdn_rig.py); draft length 8 (the
recipe's --speculative-num-draft-tokens), batch 1/4/8.
Usage: BITEXACT_SGLANG_TREE=... python -m lab.kernels.bench_gdn_verify
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sglang_tree

HERE = Path(__file__).resolve().parent

# The stock backend for comparison is the tree's file with the series taken off (checks/gpu/series.py),
# which reads the series from the runner's variable: this checkout's, unless one is named.
os.environ.setdefault("BITEXACT_SGLANG_SERIES", str(HERE.parents[1] / "patches" / "sglang"))


def capture(run: Callable[[], Any]) -> Any:
    import torch

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        run()  # compile and warm up outside the capture
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        run()
    return graph


def time_graph(graph: Any, flush: Any, iters: int) -> tuple[float, float]:
    """(cold median, hot mean) GPU microseconds per replay."""
    import torch

    cold = []
    for _ in range(iters):
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        cold.append(start.elapsed_time(end) * 1e3)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    graph.replay()
    start.record()
    for _ in range(iters):
        graph.replay()
    end.record()
    end.synchronize()
    return statistics.median(cold), start.elapsed_time(end) * 1e3 / iters


def bench_batch(
    t: Any, sg: Any, batch: int, draft: int, iters: int, flush: Any
) -> dict[str, tuple[float, float]]:
    """Captured exact verify, stock verify and `draft` decode steps for one batch size, timed."""
    rig = t.GdnRig(sg, batch, draft, seed=batch)
    mixed_qkv, a, b = rig.split(rig.qkvz, rig.ba)
    verify_fb = rig.forward_batch(verify=True)
    graphs, backends = {}, []  # a graph holds no reference to the pools it reads: keep them alive
    for name, module, exact in (("exact", sg.gdn, True), ("stock", sg.stock, False)):
        backend = rig.backend(rig.pool(), module, verify=True)
        backends.append(backend)
        with sg.det.override(enable_deterministic_inference=exact):
            graphs[name] = capture(
                lambda backend=backend: backend.forward_extend(rig.layer, verify_fb, mixed_qkv, a, b)
            )
    decode_backend = rig.backend(rig.pool(), sg.gdn, verify=False)
    decode_fb = rig.forward_batch(verify=False)
    qkvz = rig.qkvz.view(batch, draft, -1)
    ba = rig.ba.view(batch, draft, -1)
    steps = [(qkvz[:, i].contiguous(), ba[:, i].contiguous()) for i in range(draft)]

    def decode_all() -> None:
        for qkvz_t, ba_t in steps:
            decode_backend.forward_decode(rig.layer, decode_fb, (qkvz_t, ba_t), ba_t, ba_t)

    with sg.det.override(enable_deterministic_inference=True):
        graphs["decode"] = capture(decode_all)
    times = {name: time_graph(graph, flush, iters) for name, graph in graphs.items()}
    del graphs, backends
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=200)
    parser.add_argument("--draft", type=int, default=8)
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 4, 8])
    args = parser.parse_args()

    import torch

    tree = sglang_tree.tree_from_env()
    problem = sglang_tree.tree_problem(tree)
    if problem or not torch.cuda.is_available():
        print(f"bench_gdn_verify: cannot run: {problem or 'CUDA is not available'}", file=sys.stderr)
        return 2
    assert tree is not None
    sglang_tree.install(tree)
    import gdn_rig as t
    import sglang.srt.layers.attention.linear.exact_verify as exact_verify
    import sglang.srt.layers.attention.linear.gdn_backend as gdn

    sg = t.Sg(gdn, t.load_stock_gdn_backend(tree), exact_verify, t.deterministic_flag(), torch)
    flush = torch.empty(512 << 20, dtype=torch.uint8, device="cuda")
    import triton

    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}")
    print(f"# one GDN layer, H={t.H} HV={t.HV} K={t.K} V={t.V}, T={args.draft}, us per call (GPU time)")
    print("batch  exact cold/hot      stock cold/hot      decode x T cold/hot   exact/stock cold  hot")
    for batch in args.batches:
        res = bench_batch(t, sg, batch, args.draft, args.iters, flush)
        cells = "  ".join(f"{res[n][0]:8.1f} /{res[n][1]:7.1f}  " for n in ("exact", "stock", "decode"))
        ratio_cold = res["exact"][0] / res["stock"][0]
        ratio_hot = res["exact"][1] / res["stock"][1]
        print(f"{batch:5d}  {cells}     {ratio_cold:5.2f}       {ratio_hot:5.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
