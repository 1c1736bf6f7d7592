"""Patch 0004: the small-M Triton route of matmul_persistent.

Shapes and rules are those of the public upstream test for the route: (N, K) = (96, 5120),
(5120, 6144), (5120, 17408), (14336, 5120), M = 1..16, exact comparison (torch.equal).

What runs where: the route kernel and its batch invariance run on any CUDA card. The dispatch checks call
the real `_matmul_persistent_deepgemm` (the function the hook sits in, reached only through the tree's
own DeepGEMM eligibility test) and the real `matmul_persistent`; on a card other than SM120/121 they
monkeypatch `small_m_route.device_capability`, the SM capability query, and nothing else. A GEMM that
leaves the route reaches the DeepGEMM call, shown by a sentinel standing where `deep_gemm` would be. The
checks that run DeepGEMM itself declare the host feature `deepgemm-runs` (the runner probes it), and
equality with DeepGEMM the SM120/121 capability as well: elsewhere the runner lists them as not
applicable, with the reason.

Configs: the route's tile and launch choice (small_m_tiles) can return any of the small-M sweep's candidates
(checks/gpu/smallm_plan.py). Each of them, and the choice the route makes on this card, must give the bits of
the route as first shipped (checks/gpu/smallm_reference.py, the K order the SM120 DeepGEMM check pins) for
every M = 1..16 and every row alone, on every shape here.
"""

from __future__ import annotations

import pytest

SHAPES = [(96, 5120), (5120, 6144), (5120, 17408), (14336, 5120)]
CAP = 16


@pytest.fixture(scope="module")
def mods(sglang_root):
    import types

    import smallm_reference
    from sglang.srt.batch_invariant_ops import batch_invariant_ops, small_m_route, small_m_tiles

    return types.SimpleNamespace(
        bio=batch_invariant_ops, route=small_m_route, tiles=small_m_tiles, first=smallm_reference
    )


def _operands(n: int, k: int, m: int = CAP, seed: int = 0):
    import torch

    gen = torch.Generator(device="cpu").manual_seed(seed + n + k)
    a = torch.randn((m, k), generator=gen).to(torch.bfloat16).cuda()
    weight = torch.randn((n, k), generator=gen).mul_(k**-0.5).to(torch.bfloat16).cuda()
    bias = torch.randn((n,), generator=gen).to(torch.bfloat16).cuda()
    return a, weight.t(), bias  # b = W^T: [K, N] with a contiguous transpose, as nn.Linear hands it over


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"N{s[0]}_K{s[1]}")
def test_route_is_batch_invariant(mods, shape: tuple[int, int]) -> None:
    import torch

    a, b, _ = _operands(*shape)
    full = mods.route.small_m_matmul(a, b)
    for m in range(1, CAP + 1):
        part = mods.route.small_m_matmul(a[:m].contiguous(), b)
        assert torch.equal(part[0], full[0]), f"row 0 changes between M={m} and M={CAP}"
        assert torch.equal(part, full[:m]), f"rows of M={m} differ from the same rows at M={CAP}"


def _rule_configs(mods) -> dict[str, dict | None]:  # noqa: ANN001
    """What the route itself may run: its own choice on this card and every config its rule can return."""
    configs: dict[str, dict | None] = {"the route's own choice": None}
    for config in mods.tiles.possible_configs():
        configs[f"rule config {mods.tiles.check_config(config)}"] = config
    return configs


def _sweep_configs(mods) -> dict[str, dict | None]:  # noqa: ANN001
    import smallm_plan

    return dict(smallm_plan.candidates())


def _bit_failures(mods, shape: tuple[int, int], configs: dict[str, dict | None]) -> list[str]:  # noqa: ANN001
    """How each config differs from the first route (M = 1..16) or from its own rows alone; [] when none."""
    import functools

    from gemm_bits import first_difference

    a, b, _ = _operands(*shape)
    first = {m: mods.first.first_route_matmul(a[:m].contiguous(), b) for m in range(1, CAP + 1)}
    failures = []
    for name, config in configs.items():
        try:
            route = functools.partial(mods.route.small_m_matmul, b=b, config=config)
            difference = first_difference(route, a, first)
        except Exception as error:  # a config that cannot run is a failure too, named with its error
            difference = f"{type(error).__name__}: {str(error)[:200]}"
        if difference is not None:
            failures.append(f"{name}: {difference}")
    return failures


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"N{s[0]}_K{s[1]}")
def test_rule_configs_keep_the_first_routes_bits(mods, shape: tuple[int, int]) -> None:
    failures = _bit_failures(mods, shape, _rule_configs(mods))
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"N{s[0]}_K{s[1]}")
def test_sweep_candidates_keep_the_first_routes_bits(mods, shape: tuple[int, int]) -> None:
    failures = _bit_failures(mods, shape, _sweep_configs(mods))
    assert not failures, f"{len(failures)} of the sweep's candidates:\n" + "\n".join(failures[:40])


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"N{s[0]}_K{s[1]}")
def test_tma_configs_fall_back_with_the_same_bits(mods, shape: tuple[int, int]) -> None:
    """A TMA config whose activation is not 16-byte aligned runs the pointer kernel, with the same bits."""
    import smallm_plan
    import torch

    a, b, _ = _operands(*shape)
    shifted = torch.empty((a.numel() + 1,), dtype=a.dtype, device=a.device)[1:].view(a.shape)
    shifted.copy_(a)
    assert mods.route._tma_ready(a) and not mods.route._tma_ready(shifted)
    want = mods.first.first_route_matmul(a, b)
    # the rule's TMA configs and one of the plan's (each misaligned fallback is a compile of its own)
    tma = [c for c in mods.tiles.possible_configs() if c["LOAD"] == "tma"]
    tma += [next(c for c in smallm_plan.candidates().values() if c["LOAD"] == "tma")]
    for config in tma:
        assert torch.equal(mods.route.small_m_matmul(shifted, b, config=config), want), config


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"N{s[0]}_K{s[1]}")
def test_route_bias_added_after_in_bf16(mods, shape: tuple[int, int]) -> None:
    import torch

    a, b, bias = _operands(*shape)
    plain = mods.route.small_m_matmul(a, b)
    with_bias = mods.route.small_m_matmul(a, b, bias=bias)
    assert torch.equal(with_bias, plain + bias)
    ref = a.float() @ b.float()
    assert torch.allclose(plain.float(), ref, atol=2e-2, rtol=2e-2), "route result is not a @ b"


@pytest.fixture
def sm120(mods, monkeypatch: pytest.MonkeyPatch):
    """Route on: the recipe's variable, and the SM capability query answering 12.0 where it does not."""
    monkeypatch.setenv(mods.route.SMALL_M_ENV, str(CAP))
    real = mods.route.device_capability(0)
    if real not in mods.route.ROUTED_CAPABILITIES:
        monkeypatch.setattr(mods.route, "device_capability", lambda index: (12, 0))
    return real


def _deepgemm_available(mods) -> bool:
    return "deep_gemm" in vars(mods.bio)


def _route_off(mods, monkeypatch: pytest.MonkeyPatch, fn, *args):  # noqa: ANN001, ANN202
    """`fn(*args)` with the route's variable at 0: what the tree's DeepGEMM path alone gives."""
    monkeypatch.setenv(mods.route.SMALL_M_ENV, "0")
    try:
        return fn(*args)
    finally:
        monkeypatch.setenv(mods.route.SMALL_M_ENV, str(CAP))


class _DeepGemmCalled(RuntimeError):
    pass


class _DeepGemmSentinel:
    """Stands where the `deep_gemm` module would be: any use of it shows that a GEMM went there."""

    def __getattr__(self, name: str) -> object:
        raise _DeepGemmCalled(f"deep_gemm.{name}")


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"N{s[0]}_K{s[1]}")
def test_dispatch_inside_deepgemm_path(
    mods, sm120, monkeypatch: pytest.MonkeyPatch, shape: tuple[int, int]
) -> None:
    """M <= cap bf16 -> route (+bias after); M > cap or fp32 output -> the DeepGEMM call, shown by a
    sentinel where the `deep_gemm` module stands (so this runs where DeepGEMM cannot)."""
    import torch

    monkeypatch.setattr(mods.bio, "deep_gemm", _DeepGemmSentinel(), raising=False)
    a17, b, bias = _operands(*shape, m=CAP + 1)
    for m in (1, 7, CAP):
        a = a17[:m].contiguous()
        got = mods.bio._matmul_persistent_deepgemm(a, b, torch.bfloat16, bias)
        assert torch.equal(got, mods.route.small_m_matmul(a, b, bias=bias)), f"M={m} did not take the route"
    for a, out_dtype in [(a17, torch.bfloat16), (a17[:4].contiguous(), torch.float32)]:  # M = cap + 1; fp32
        with pytest.raises(_DeepGemmCalled):
            mods.bio._matmul_persistent_deepgemm(a, b, out_dtype, bias)


@pytest.mark.host_feature("deepgemm-runs")
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"N{s[0]}_K{s[1]}")
def test_leaving_the_route_gives_deepgemms_result(
    mods, sm120, monkeypatch: pytest.MonkeyPatch, shape: tuple[int, int]
) -> None:
    """Where DeepGEMM runs: a GEMM past the cap, or with fp32 output, is DeepGEMM's own result."""
    import torch

    assert _deepgemm_available(mods), "the runner found DeepGEMM running, but the tree did not import it"
    a17, b, bias = _operands(*shape, m=CAP + 1)
    for a, out_dtype in [(a17, torch.bfloat16), (a17[:4].contiguous(), torch.float32)]:
        got = mods.bio._matmul_persistent_deepgemm(a, b, out_dtype, bias)
        want = _route_off(mods, monkeypatch, mods.bio._matmul_persistent_deepgemm, a, b, out_dtype, bias)
        assert torch.equal(got, want), f"M={a.shape[0]}, {out_dtype}: not DeepGEMM's result"


def test_dispatch_needs_cap_and_sm120(mods, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    a, b, _ = _operands(5120, 6144, m=4)
    monkeypatch.delenv(mods.route.SMALL_M_ENV, raising=False)
    assert not mods.route.small_m_route_applies(a, torch.bfloat16), "route on without the variable"
    monkeypatch.setenv(mods.route.SMALL_M_ENV, str(CAP))
    monkeypatch.setattr(mods.route, "device_capability", lambda index: (9, 0))
    assert not mods.route.small_m_route_applies(a, torch.bfloat16), "route on for sm90"
    monkeypatch.setattr(mods.route, "device_capability", lambda index: (12, 1))
    assert mods.route.small_m_route_applies(a, torch.bfloat16)
    assert not mods.route.small_m_route_applies(a, torch.float32)
    monkeypatch.setenv(mods.route.SMALL_M_ENV, "sixteen")
    with pytest.raises(ValueError, match="SMALL_M_TRITON"):
        mods.route.small_m_route_applies(a, torch.bfloat16)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"N{s[0]}_K{s[1]}")
def test_matmul_persistent_without_deepgemm(
    mods, sm120, monkeypatch: pytest.MonkeyPatch, shape: tuple[int, int]
) -> None:
    """The real entry point, M = 1..17, with the tree's DeepGEMM switch off (a tree without deep_gemm, and
    the servers of a host where DeepGEMM does not run): the route is never taken, persistent Triton for
    every M, and row 0 the same for every M."""
    import torch

    monkeypatch.setattr(mods.bio, "ENABLE_JIT_DEEPGEMM", False)
    a17, b, bias = _operands(*shape, m=CAP + 1)
    row0 = None
    for m in range(1, CAP + 2):
        a = a17[:m].contiguous()
        got = mods.bio.matmul_persistent(a, b, bias=bias)
        assert torch.equal(got, mods.bio._matmul_persistent_triton(a, b, torch.bfloat16, bias))
        row0 = got[0] if row0 is None else row0
        assert torch.equal(got[0], row0), f"row 0 flips at M={m}"


@pytest.mark.host_feature("deepgemm-runs")
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"N{s[0]}_K{s[1]}")
def test_matmul_persistent_with_deepgemm(
    mods, sm120, monkeypatch: pytest.MonkeyPatch, shape: tuple[int, int]
) -> None:
    """The real entry point, M = 1..17, where DeepGEMM runs: the route up to the cap, DeepGEMM above it; on
    a real SM120/121 card row 0 must then be the same for every M."""
    import torch

    assert _deepgemm_available(mods), "the runner found DeepGEMM running, but the tree did not import it"
    a17, b, bias = _operands(*shape, m=CAP + 1)
    row0 = None
    for m in range(1, CAP + 2):
        a = a17[:m].contiguous()
        got = mods.bio.matmul_persistent(a, b, bias=bias)
        if m <= CAP:
            assert torch.equal(got, mods.route.small_m_matmul(a, b, bias=bias)), f"M={m} missed the route"
        else:
            want = _route_off(mods, monkeypatch, mods.bio.matmul_persistent, a, b, bias)
            assert torch.equal(got, want), f"M={m} did not go to DeepGEMM"
        if sm120 in mods.route.ROUTED_CAPABILITIES:
            row0 = got[0] if row0 is None else row0
            assert torch.equal(got[0], row0), f"row 0 flips at M={m}"


@pytest.mark.capability("12.0", "12.1")
@pytest.mark.host_feature("deepgemm-runs")
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"N{s[0]}_K{s[1]}")
def test_route_equals_deepgemm_on_sm120(
    mods, monkeypatch: pytest.MonkeyPatch, shape: tuple[int, int]
) -> None:
    import torch

    assert mods.route.device_capability(0) in mods.route.ROUTED_CAPABILITIES
    assert _deepgemm_available(mods), "the runner found DeepGEMM running, but the tree did not import it"
    monkeypatch.setenv(mods.route.SMALL_M_ENV, str(CAP))
    a17, b, bias = _operands(*shape, m=CAP + 1)
    for m in range(1, CAP + 1):
        a = a17[:m].contiguous()
        route = mods.bio.matmul_persistent(a, b, bias=bias)
        monkeypatch.setenv(mods.route.SMALL_M_ENV, "0")
        deepgemm = mods.bio.matmul_persistent(a, b, bias=bias)
        monkeypatch.setenv(mods.route.SMALL_M_ENV, str(CAP))
        assert torch.equal(route, deepgemm), f"route != DeepGEMM at M={m}"
    row17 = mods.bio.matmul_persistent(a17, b, bias=bias)
    assert torch.equal(row17[0], mods.bio.matmul_persistent(a17[:1].contiguous(), b, bias=bias)[0])
