"""Patch 0002: GDN target verify under deterministic inference equals T sequential decode steps.

Everything runs through SGLang's own `GDNAttnBackend.forward_extend` (verify) and `forward_decode`
(decode, both its fused projection+conv path and its plain conv path) with SGLang's real kernels, on
SGLang's own pool classes (`MambaPool.SpeculativeState` with the deduplicated conv-window layout
the CUDA pool allocates), `ForwardBatch`, `ForwardMetadata`, `DFlashVerifyInput` and
`RadixLinearAttention`, and the real commit (`scatter_mamba_states_after_mtp_verify`). Constructors
that need a whole ModelRunner are bypassed with `object.__new__`; the methods under test read only
the attributes set here. Geometry: Qwen3.8-27B's GDN layers (16 key heads and 48 value heads of
128, conv width 4), bf16 activations and conv state, fp32 SSM state (`--mamba-ssm-dtype float32`).

The stock verify for comparison is the tree's own `gdn_backend.py` as released: every patch of the series
that touches it (0002, 0007) taken off again with GNU patch (checks/gpu/series.py, the series from the
runner's inputs), so "exact mode off leaves the stock path unchanged" is checked against the unpatched
code, not against a re-implementation.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from gdn_rig import (
    HV,
    QKV_DIM,
    WIDTH,
    GdnRig,
    H,
    K,
    Sg,
    V,
    bitwise_equal,
    deterministic_flag,
    load_stock_gdn_backend,
)


@pytest.fixture(scope="module")
def sg(sglang_root: Path) -> Sg:
    import sglang.srt.layers.attention.linear.exact_verify as exact_verify
    import sglang.srt.layers.attention.linear.gdn_backend as gdn
    import torch

    return Sg(gdn, load_stock_gdn_backend(sglang_root), exact_verify, deterministic_flag(), torch)


BATCHES = range(1, 9)
DRAFTS = range(1, 10)


@pytest.fixture(scope="module")
def decode_runs(sg: Sg) -> dict[tuple[int, int], tuple[GdnRig, dict[str, Any], dict[str, Any]]]:
    """Per (batch, draft): the rig and its decode references (fused path, plain conv path)."""
    runs = {}
    for batch in BATCHES:
        for draft in DRAFTS:
            rig = GdnRig(sg, batch, draft, seed=1000 * batch + draft)
            runs[batch, draft] = (rig, rig.decode(fused=True), rig.decode(fused=False))
    return runs


def test_decode_paths_agree(decode_runs: dict) -> None:
    """Decode's fused projection+conv path and its plain conv path give the same bits."""
    for (batch, draft), (_rig, fused, plain) in decode_runs.items():
        for key in ("out", "ssm", "conv"):
            assert bitwise_equal(fused[key], plain[key]), f"B={batch} T={draft}: decode paths differ in {key}"


@pytest.mark.parametrize("batch", BATCHES)
def test_exact_verify_equals_sequential_decode(sg: Sg, decode_runs: dict, batch: int) -> None:
    """Outputs, every step's SSM state and conv window: bitwise equal to T decode steps, T = 1..9."""
    for draft in DRAFTS:
        rig, ref, _ = decode_runs[batch, draft]
        got = rig.verify(exact=True)
        where = f"B={batch} T={draft}"
        assert bitwise_equal(got["out"], ref["out"]), f"{where}: output differs from decode"
        assert bitwise_equal(got["ssm"], ref["ssm"]), f"{where}: intermediate SSM state differs"
        assert bitwise_equal(got["conv"], ref["conv"]), f"{where}: intermediate conv window differs"
        # The live state stays as it was until the commit.
        assert bitwise_equal(got["live_ssm"], rig.ssm0), f"{where}: verify wrote the live SSM state"
        assert bitwise_equal(got["live_conv"], rig.conv0), f"{where}: verify wrote the live conv window"


@pytest.mark.parametrize("batch", [1, 3, 8])
def test_commit_after_exact_verify_equals_decode(sg: Sg, decode_runs: dict, batch: int) -> None:
    """The existing commit step, fed by the exact verify, leaves the state decode leaves."""
    import torch
    from sglang.kernels.ops.mamba.mamba_state_scatter_triton import scatter_mamba_states_after_mtp_verify

    draft = 8
    rig, ref, _ = decode_runs[batch, draft]
    got = rig.verify(exact=True)
    accepted = torch.arange(batch, device=rig.device) % draft  # last accepted step per request
    cache = got["pool"].mamba_cache
    scatter_mamba_states_after_mtp_verify(cache, rig.slots, accepted, None, None)
    slots = rig.slots.long()
    for i in range(batch):
        step = int(accepted[i])
        assert bitwise_equal(cache.temporal[0][slots[i]], ref["ssm"][i, step]), f"request {i} SSM state"
        assert bitwise_equal(cache.conv[0][0][slots[i]], ref["conv"][i, step]), f"request {i} conv window"


@pytest.mark.parametrize("batch", [1, 4, 8])
def test_stock_verify_differs_from_decode(sg: Sg, decode_runs: dict, batch: int) -> None:
    """Without the patch the same verify is not decode's arithmetic (so the check above can fail)."""
    rig, ref, _ = decode_runs[batch, 8]
    stock = rig.verify(module=sg.stock, exact=True)
    assert not bitwise_equal(stock["ssm"], ref["ssm"]), "stock verify SSM states equal decode's"
    assert not bitwise_equal(stock["out"], ref["out"]), "stock verify outputs equal decode's"


@pytest.mark.parametrize(("batch", "draft"), [(1, 8), (4, 8), (8, 8), (3, 5)])
def test_exact_mode_off_is_the_stock_path(sg: Sg, decode_runs: dict, batch: int, draft: int) -> None:
    """Without deterministic inference the patched backend does what the unpatched one does."""
    rig, _, _ = decode_runs[batch, draft]
    patched = rig.verify(exact=False)
    stock = rig.verify(module=sg.stock, exact=False)
    for key in ("out", "ssm", "conv", "live_ssm", "live_conv"):
        assert bitwise_equal(patched[key], stock[key]), f"exact mode off changed {key}"


def test_exact_path_guard(sg: Sg, decode_runs: dict) -> None:
    """The exact path is taken only under deterministic inference."""
    rig, _, _ = decode_runs[2, 8]
    pool = rig.pool()
    backend = rig.backend(pool, sg.gdn, verify=True)
    with sg.det.override(enable_deterministic_inference=False):
        assert not sg.exact_verify.use_exact_target_verify(backend, pool.mamba_cache)
    with sg.det.override(enable_deterministic_inference=True):
        assert sg.exact_verify.use_exact_target_verify(backend, pool.mamba_cache)


def test_exact_verify_under_cuda_graph(sg: Sg, decode_runs: dict) -> None:
    """Captured in a CUDA graph (as the verify runs in serving) and replayed: the same bits."""
    import torch

    rig, ref, _ = decode_runs[4, 8]
    pool = rig.pool()
    backend = rig.backend(pool, sg.gdn, verify=True)
    fb = rig.forward_batch(verify=True)
    mixed_qkv, a, b = rig.split(rig.qkvz, rig.ba)
    with sg.det.override(enable_deterministic_inference=True):
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            backend.forward_extend(rig.layer, fb, mixed_qkv, a, b)  # compile outside the capture
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = backend.forward_extend(rig.layer, fb, mixed_qkv, a, b)
    pool.mamba_cache.intermediate_ssm.zero_()
    graph.replay()
    torch.cuda.synchronize()
    rows = backend.verify_intermediate_state_indices[: rig.batch].long()
    assert bitwise_equal(out.reshape(rig.batch, rig.draft, HV, V), ref["out"])
    assert bitwise_equal(pool.mamba_cache.intermediate_ssm[0][rows, : rig.draft], ref["ssm"])


@pytest.mark.parametrize("batch", [1, 4, 8])
def test_exact_kernels_equal_decode_kernels(sglang_root: Path, batch: int) -> None:
    """Kernel level, without the backend: the new module's two launches against decode's own
    `causal_conv1d_update` + `fused_recurrent_gated_delta_rule_packed_decode`, step by step."""
    import torch
    from sglang.kernels.ops.attention.fla.fused_recurrent import (
        fused_recurrent_gated_delta_rule_packed_decode,
    )
    from sglang.kernels.ops.mamba.causal_conv1d_triton import causal_conv1d_update
    from sglang.srt.layers.attention.linear.exact_verify import exact_gdn_target_verify

    for draft in (1, 8, 9):
        gen = torch.Generator().manual_seed(batch * 10 + draft)

        def randn(*shape: int, scale: float = 1.0, dtype: Any = torch.bfloat16, gen: Any = gen) -> Any:
            return (torch.randn(*shape, generator=gen) * scale).to(dtype).cuda()

        slots = (torch.randperm(2 * batch, generator=gen)[:batch]).to(torch.int32).cuda()
        conv0 = randn(2 * batch + 1, QKV_DIM, WIDTH - 1)
        ssm0 = randn(2 * batch + 1, HV, V, K, scale=0.05, dtype=torch.float32)
        mixed = randn(batch * draft, QKV_DIM)
        a, b = randn(batch * draft, HV), randn(batch * draft, HV)
        weight, dt_bias = randn(QKV_DIM, WIDTH, scale=0.5), randn(HV)
        A_log = torch.empty(HV).uniform_(1.0, 16.0, generator=gen).log().cuda()
        inter_ssm = torch.zeros(2 * batch + 1, draft, HV, V, K, device="cuda")
        inter_conv = torch.zeros(
            2 * batch + 1, draft, QKV_DIM, WIDTH - 1, dtype=torch.bfloat16, device="cuda"
        )
        rows = torch.arange(2 * batch + 1, dtype=torch.int32, device="cuda")
        conv, ssm = conv0.clone(), ssm0.clone()
        out = exact_gdn_target_verify(
            mixed_qkv=mixed,
            a=a,
            b=b,
            conv_weights=weight,
            conv_bias=None,
            activation="silu",
            A_log=A_log,
            dt_bias=dt_bias,
            conv_states=conv,
            ssm_states=ssm,
            cache_indices=slots,
            intermediate_conv_window=inter_conv,
            intermediate_ssm=inter_ssm,
            intermediate_state_indices=rows,
            num_k_heads=H,
            head_k_dim=K,
            num_v_heads=HV,
            head_v_dim=V,
            draft_token_num=draft,
        ).view(batch, draft, HV, V)
        assert bitwise_equal(conv, conv0) and bitwise_equal(ssm, ssm0), "exact verify wrote a live state"
        for t in range(draft):
            step = slice(None), t
            x_t = mixed.view(batch, draft, -1)[step].contiguous()
            conv_out = causal_conv1d_update(x_t, conv, weight, None, "silu", conv_state_indices=slots)
            dec = torch.empty(batch, 1, HV, V, dtype=torch.bfloat16, device="cuda")
            fused_recurrent_gated_delta_rule_packed_decode(
                mixed_qkv=conv_out,
                a=a.view(batch, draft, HV)[step].contiguous(),
                b=b.view(batch, draft, HV)[step].contiguous(),
                A_log=A_log,
                dt_bias=dt_bias,
                scale=K**-0.5,
                initial_state=ssm,
                out=dec,
                ssm_state_indices=slots,
                use_qk_l2norm_in_kernel=True,
            )
            where = f"B={batch} T={draft} step {t}"
            assert bitwise_equal(out[:, t], dec[:, 0]), f"{where}: output"
            assert bitwise_equal(inter_ssm[:batch, t], ssm[slots.long()]), f"{where}: SSM state"
            assert bitwise_equal(inter_conv[:batch, t], conv[slots.long()]), f"{where}: conv window"
