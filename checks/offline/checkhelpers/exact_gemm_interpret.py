"""Run patch 0005's exact GEMM kernels under Triton's interpreter on a CPU and check what they compute.

Usage: TRITON_INTERPRET=1 BITEXACT_SGLANG_TREE=<tree with the route>
python -m checkhelpers.exact_gemm_interpret (checks/offline/test_exact_gemm_interpreter.py runs it with the
released triton 3.6.0 wheel). Prints one line per failure and a count; exit 0 when every check holds, 1
otherwise.

The interpreter cannot multiply bfloat16 (triton-lang/triton#11584), so operands are float16, of the same
size: what this proves is indexing (every output written once from the right rows and columns, nothing
written outside the output, K and N tails, grouped tile order and persistent loops over any program count,
TMA boxes and the pointer fallback), the bias added before the store, the output dtype, and rows that do not
depend on M. bf16 bits against the persistent kernel are the GPU check's (checks/gpu/test_exact_gemm.py).
"""

from __future__ import annotations

import sys

import sglang_tree

SMS = 3  # few SMs, so persistent programs each walk several tiles
# N, K: tails for every tile width and K block; K * 2 bytes % 16 == 0 so that TMA configs take TMA
SHAPES = [(80, 304), (200, 72)]
MS = (1, 5, 16, 17, 40, 64, 130)
# Beyond the rule: a grouped, flattened, persistent config with tiles smaller than the shapes.
EXTRA = [
    {
        "LOAD": "kn",
        "BLOCK_M": 16,
        "BLOCK_N": 32,
        "BLOCK_K": 64,
        "GROUP_M": 2,
        "PROGRAMS_PER_SM": 1,
        "FLATTEN": True,
    },
    {"LOAD": "nk", "BLOCK_M": 32, "BLOCK_N": 16, "BLOCK_K": 32, "GROUP_M": 3, "PROGRAMS_PER_SM": 2},
    {"LOAD": "tma", "BLOCK_M": 64, "BLOCK_N": 32, "BLOCK_K": 64, "GROUP_M": 1, "PROGRAMS_PER_SM": 0},
]


def main() -> int:
    problem = sglang_tree.install_for_interpreter()
    if problem:
        print(problem, file=sys.stderr)
        return 2
    import torch
    from sglang.srt.batch_invariant_ops import exact_gemm, exact_gemm_tiles, small_m_route

    small_m_route._card = lambda device: (SMS, 0)  # the route's one device query; no CUDA here
    configs = exact_gemm_tiles.possible_configs() + [exact_gemm_tiles.check_config(c) for c in EXTRA]
    failures: list[str] = []
    checked = 0
    for n, k in SHAPES:
        gen = torch.Generator().manual_seed(n + k)
        w = torch.randn((n, k), generator=gen).mul_(k**-0.5).to(torch.float16)
        a = torch.randn((max(MS), k), generator=gen).to(torch.float16)
        bias = torch.randn((n,), generator=gen).to(torch.float16)
        exact = a.double() @ w.double().t()
        for config in configs:
            name = f"({n}, {k}) {exact_gemm_tiles.config_id(config)}"
            rows: dict[int, torch.Tensor] = {}
            for m in sorted(MS, reverse=True):
                for out_dtype, with_bias in ((torch.float16, False), (torch.float32, True)):
                    # the output is a window of a NaN-filled buffer: anything written outside it shows
                    buffer = torch.full((m + 2, n + 16), float("nan"), dtype=out_dtype)
                    out = buffer[1 : m + 1, 8 : n + 8]
                    exact_gemm.exact_gemm(
                        a[:m], w.t(), bias=bias if with_bias else None, config=config, out=out
                    )
                    checked += 1
                    label = (
                        f"{name} M={m} {str(out_dtype).removeprefix('torch.')}{' +bias' if with_bias else ''}"
                    )
                    outside = buffer.clone()
                    outside[1 : m + 1, 8 : n + 8] = 0
                    if not torch.isnan(outside[[0, m + 1]]).all() or not torch.isnan(outside[:, :8]).all():
                        failures.append(f"{label}: wrote outside the output")
                    if not torch.isnan(outside[:, n + 8 :]).all():
                        failures.append(f"{label}: wrote past column N")
                    want = exact[:m] + (bias.double() if with_bias else 0)
                    if torch.isnan(out).any():
                        failures.append(f"{label}: left outputs unwritten")
                    elif not torch.allclose(out.double(), want, rtol=1e-2, atol=1e-2):
                        err = (out.double() - want).abs().max().item()
                        failures.append(f"{label}: not a @ w.T (+ bias) (max abs error {err:.3g})")
                    if out_dtype == torch.float16:
                        full = rows.setdefault(max(MS), out.clone())
                        if not torch.equal(out, full[:m]):
                            failures.append(f"{label}: rows differ from the same rows at M={max(MS)}")
        # a TMA config whose weight is not 16-byte aligned runs the pointer kernel with the same result
        tma = next(c for c in configs if c["LOAD"] == "tma")
        shifted = torch.empty((w.numel() + 1,), dtype=w.dtype)[1:].view(w.shape)
        shifted.copy_(w)
        aligned = exact_gemm.exact_gemm(a[:5], w.t(), config=tma)
        fallback = exact_gemm.exact_gemm(a[:5], shifted.t(), config=tma)
        checked += 2
        if not torch.equal(aligned, fallback):
            failures.append(
                f"({n}, {k}) {exact_gemm_tiles.config_id(tma)}: the pointer fallback differs from TMA"
            )
    for failure in failures:
        print(failure)
    print(f"exact_gemm_interpret: {checked} products checked, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
