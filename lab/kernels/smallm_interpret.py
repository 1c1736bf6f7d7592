"""Run every small-M sweep kernel under Triton's interpreter on a CPU and check what it computes.

Usage: TRITON_INTERPRET=1 BITEXACT_SGLANG_TREE=<tree with the route> python -m lab.kernels.smallm_interpret
(lab/tests/test_smallm_interpreter.py runs it with the released triton 3.6.0 wheel). Exit 0 when every
check holds; otherwise each failure is printed and the exit code is 1.

The interpreter cannot multiply bfloat16 (it keeps bf16 as uint16 bit patterns and `tl.dot` multiplies those;
triton-lang/triton#11584, documented as unsupported), so the operands here are float16, which has the same
element size: strides, TMA boxes, alignment and masks are exactly the bf16 ones. What this proves is the
kernels' indexing: every output computed once from the right rows and columns, rows past M and columns past N
never written, K tails zero-filled, the persistent loop covering every tile for any program count, the TMA
path and its pointer fallback. What it cannot prove is bf16 arithmetic or bits: those are the GPU sweep's.
"""

from __future__ import annotations

import sys
from pathlib import Path

import sglang_tree
import smallm_plan

HERE = Path(__file__).resolve().parent

SMS = 3  # few SMs, so persistent programs each walk several tiles
# N, K: a tail for every tile width and K block, N below the widest tile; K * 2 bytes % 16 == 0 (TMA)
SHAPES = [(80, 304)]
MS = (1, 5, 16)


def main() -> int:
    problem = sglang_tree.install_for_interpreter()
    if problem:
        print(problem, file=sys.stderr)
        return 2
    import smallm_reference
    import torch
    from sglang.srt.batch_invariant_ops import small_m_route, small_m_tiles

    small_m_route._card = lambda device: (SMS, 0)  # the route's one device query; no CUDA here
    failures: list[str] = []
    checked = 0
    for n, k in SHAPES:
        gen = torch.Generator().manual_seed(n + k)
        w = torch.randn((n, k), generator=gen).mul_(k**-0.5).to(torch.float16)
        a16 = torch.randn((16, k), generator=gen).to(torch.float16)
        exact = a16.double() @ w.double().t()
        first = smallm_reference.first_route_matmul(a16, w.t(), sm_count=SMS)
        if not torch.allclose(first.double(), exact, rtol=1e-2, atol=1e-2):
            failures.append(f"({n}, {k}) first route: not a @ w.T")
        for kernel in smallm_plan.KERNELS:
            for per_sm in (0, 1) if not kernel["FLATTEN"] else (1, 2):
                config = {**kernel, "PROGRAMS_PER_SM": per_sm}
                name = f"({n}, {k}) {smallm_plan.candidate_id(config)}"
                small_m_tiles.check_config(config)
                full = None
                for m in sorted(MS, reverse=True):
                    # the output is a window of a NaN-filled buffer: anything written outside it shows
                    buffer = torch.full((m + 2, n + 16), float("nan"), dtype=torch.bfloat16)
                    out = buffer[1 : m + 1, 8 : n + 8]
                    small_m_route.small_m_matmul(a16[:m], w.t(), out=out, config=config)
                    checked += 1
                    outside = buffer.clone()
                    outside[1 : m + 1, 8 : n + 8] = 0
                    if not torch.isnan(outside[[0, m + 1]]).all() or not torch.isnan(outside[:, :8]).all():
                        failures.append(f"{name} M={m}: wrote outside the output")
                    if not torch.isnan(outside[:, n + 8 :]).all():
                        failures.append(f"{name} M={m}: wrote past column N")
                    if torch.isnan(out).any():
                        failures.append(f"{name} M={m}: left outputs unwritten")
                    elif not torch.allclose(out.double(), exact[:m], rtol=1e-2, atol=1e-2):
                        err = (out.double() - exact[:m]).abs().max().item()
                        failures.append(f"{name} M={m}: not a @ w.T (max abs error {err:.3g})")
                    if full is None:
                        full = out.clone()
                    elif not torch.equal(out, full[:m]):
                        failures.append(f"{name} M={m}: rows differ from the same rows at M=16")
                if kernel["LOAD"] == "tma" and per_sm == 1:
                    shifted = torch.empty((16 * k + 1,), dtype=torch.float16)[1:].view(16, k)
                    shifted.copy_(a16)
                    if small_m_route._tma_ready(shifted):
                        failures.append(f"{name}: a misaligned activation passed as TMA-ready")
                    got = small_m_route.small_m_matmul(shifted, w.t(), config=config)
                    if not torch.allclose(got.double(), exact, rtol=1e-2, atol=1e-2):
                        failures.append(f"{name}: the pointer fallback for a misaligned a is not a @ w.T")
    for line in failures:
        print("FAIL", line)
    print(f"{checked} interpreted launches, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
