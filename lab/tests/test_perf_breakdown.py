"""lab/perf/breakdown.py: kernel names sorted into GEMM / GDN / attention / rest, and per-cycle totals
from a real torch.profiler trace (recorded here on the CPU) carrying GPU events in Kineto's schema
(checks/offline/checkhelpers/perf_traces.py says where each field comes from)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from checkhelpers import perf_traces

from lab.perf import breakdown

REPO = Path(__file__).resolve().parents[2]

# (kernel name as the profiler names it, component, label, where the name comes from)
NAMES = [
    # SGLang 0.5.20's Triton kernels (the profiler names a Triton kernel after its @triton.jit function):
    (
        "matmul_kernel_persistent",
        "gemm",
        "persistent Triton",
        "srt/batch_invariant_ops/batch_invariant_ops.py",
    ),
    ("bmm_kernel_persistent", "gemm", "persistent Triton", "srt/batch_invariant_ops/batch_invariant_ops.py"),
    ("_rms_norm_kernel", "rest", "norms", "srt/batch_invariant_ops/batch_invariant_ops.py"),
    ("_log_softmax_kernel", "rest", "sampling", "srt/batch_invariant_ops/batch_invariant_ops.py"),
    (
        "fused_recurrent_gated_delta_rule_packed_decode_kernel",
        "gdn",
        "GDN recurrence",
        "kernels/ops/attention/fla/fused_recurrent.py; docs/gdn-verify.md",
    ),
    (
        "fused_sigmoid_gating_delta_rule_update_kernel",
        "gdn",
        "GDN recurrence",
        "kernels/ops/attention/fla/fused_sigmoid_gating_recurrent.py (stock verify)",
    ),
    ("chunk_gated_delta_rule_fwd_kernel_h_blockdim64", "gdn", "chunked prefill", "fla/chunk_delta_h.py"),
    ("chunk_fwd_kernel_o", "gdn", "chunked prefill", "fla/chunk_o.py"),
    ("chunk_local_cumsum_scalar_kernel", "gdn", "chunked prefill", "fla/cumsum.py"),
    ("recompute_w_u_fwd_kernel", "gdn", "chunked prefill", "fla/wy_fast.py"),
    ("l2norm_fwd_kernel", "gdn", "chunked prefill", "fla/l2norm.py"),
    ("fused_gdn_gating_kernel", "gdn", "gating", "fla/fused_gdn_gating.py"),
    ("_layer_norm_fwd_1pass_kernel", "gdn", "norm", "fla/layernorm_gated.py (the GDN's gated RMSNorm)"),
    ("_causal_conv1d_update_kernel", "gdn", "conv", "kernels/ops/mamba/causal_conv1d_triton.py"),
    (
        "fused_qkvzba_split_reshape_cat_kernel",
        "gdn",
        "projection split",
        "kernels/ops/attention/triton_gdn_fused_proj.py",
    ),
    (
        "_fused_mamba_state_scatter_with_mask_kernel",
        "gdn",
        "state commit",
        "kernels/ops/mamba/mamba_state_scatter_triton.py",
    ),
    (
        "track_mamba_states_all_layers_kernel",
        "gdn",
        "state commit",
        "kernels/ops/mamba/mamba_state_scatter_triton.py",
    ),
    (
        "_fwd_grouped_kernel_stage1",
        "attention",
        "Triton attention",
        "kernels/ops/attention/decode_attention.py",
    ),
    ("_fwd_kernel_stage1", "attention", "Triton attention", "kernels/ops/attention/decode_attention.py"),
    ("_fwd_kernel_stage2", "attention", "Triton attention", "kernels/ops/attention/decode_attention.py"),
    ("_fwd_kernel", "attention", "Triton attention", "kernels/ops/attention/extend_attention.py"),
    ("_fwd_kernel_unified", "attention", "Triton attention", "kernels/ops/attention/extend_attention.py"),
    ("create_flashinfer_kv_indices_triton", "attention", "KV-cache", "kernels/ops/kvcache/kv_indices.py"),
    ("_fused_qk_rope_reshape_and_cache_kernel", "attention", "RoPE", "kernels/ops/kvcache/rope_cache.py"),
    # Our series (patches/sglang/; docs/gdn-verify.md, docs/kernels.md):
    ("_exact_verify_recurrence_kernel", "gdn", "GDN recurrence", "0002-exact-gdn-verify.patch"),
    ("_exact_verify_conv_kernel", "gdn", "conv", "0002-exact-gdn-verify.patch"),
    ("_shared_rows_stage1", "attention", "Triton attention", "0003-exact-verify-attention.patch"),
    ("_rows_stage1", "attention", "Triton attention", "0003 before its shared rows (2026-12-01 traces)"),
    ("_rows_stage2", "attention", "Triton attention", "0003-exact-verify-attention.patch"),
    ("_small_m_gemm_kernel", "gemm", "small-M route", "0004-small-m-triton-route.patch"),
    ("_small_m_gemm_tma_kernel", "gemm", "small-M route", "0004-small-m-triton-route.patch"),
    # sglang-kernel 0.4.5's sm90 common_ops.abi3.so (demangled kernel symbols):
    (
        "void causal_conv1d_fwd_kernel<Causal_conv1d_fwd_kernel_traits<128, 4, true, c10::BFloat16, "
        "c10::BFloat16> >(ConvParamsBase)",
        "gdn",
        "conv",
        "sgl_kernel/sm90/common_ops.abi3.so",
    ),
    (
        "void (anonymous namespace)::fused_q_norm_rope_kernel<128l, 64l>("
        "(anonymous namespace)::FusedQNormRopeParams)",
        "attention",
        "RoPE",
        "sgl_kernel/sm90/common_ops.abi3.so",
    ),
    # cuBLAS on Hopper and an ATen copy, as SGLang's own profiler table shows them (sgl-project/sglang PR
    # #22353, "[SKILL] add torch profiler analysis workflow"):
    ("nvjet_tst_128x24_64x11_2x1_v_bz_TNT", "gemm", "cuBLAS", "sgl-project/sglang#22353"),
    ("nvjet_tst_64x24_64x16_4x1_v_bz_splitK_TNT", "gemm", "cuBLAS", "sgl-project/sglang#22353"),
    (
        "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<"
        "at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::"
        "{lambda()#12}::operator()() const::{lambda(c10::BFloat16)#1}>(at::TensorIteratorBase&, "
        "at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::"
        "{lambda()#12}::operator()() const::{lambda(c10::BFloat16)#1} const&)",
        "rest",
        "other",
        "sgl-project/sglang#22353",
    ),
    (perf_traces.ARGMAX, "rest", "sampling", "ATen's argmax reduction"),
]


@pytest.mark.parametrize(("name", "component", "label", "source"), NAMES, ids=[n[0][:48] for n in NAMES])
def test_real_kernel_names_are_classified(name: str, component: str, label: str, source: str) -> None:
    got_component, got_label = breakdown.classify(name)
    assert (got_component, label in got_label) == (component, True), f"{name} ({source}): {got_label}"


def _trace(tmp_path: Path, iteration: list, iterations: int, gz: bool = True) -> Path:
    kinds = [k for k, _ in iteration if k is not None]
    plain = tmp_path / "cpu.json"
    trace = perf_traces.add_gpu(perf_traces.cpu_trace(plain, iterations, kinds), iteration)
    path = tmp_path / ("t.trace.json.gz" if gz else "t.trace.json")
    if gz:
        with gzip.open(path, "wt") as f:
            json.dump(trace, f)
    else:
        path.write_text(json.dumps(trace))
    return path


def test_speculative_cycles_from_a_profiler_trace(tmp_path: Path) -> None:
    """4 iterations of draft + verify + bookkeeping: 3 whole cycles anchored on VERIFY, each exactly one
    iteration's kernels, attributed to the step that launched them."""
    path = _trace(tmp_path, perf_traces.SPEC_ITERATION, iterations=4)
    result = breakdown.analyse(breakdown.load_events(path), source=path.name)
    assert result["anchor"] == "VERIFY" and result["cycles"] == 3
    assert result["step_kinds"] == ["DRAFT", "VERIFY"]
    assert result["steps_per_cycle"] == {"DRAFT": 1.0, "VERIFY": 1.0}
    us = result["per_cycle_us"]
    assert us["gemm"] == pytest.approx(430.0)  # persistent matmul: 30 in draft, 400 in verify
    assert us["gdn"] == pytest.approx(61.0)  # exact recurrence 50 + exact conv 5 + state scatter 6
    assert us["attention"] == pytest.approx(29.0)  # decode 4 + 2 in draft, verify rows 20 + 3
    assert us["rest"] == pytest.approx(13.0)  # norms 1 + 10, argmax 2
    assert us["total"] == pytest.approx(sum(perf_traces.per_cycle(perf_traces.SPEC_ITERATION).values()))
    by_step = result["by_step_us"]
    assert by_step["DRAFT"]["gemm"] == pytest.approx(30.0) and by_step["VERIFY"]["gemm"] == pytest.approx(
        400.0
    )
    assert by_step["between"]["gdn"] == pytest.approx(6.0) and by_step["between"]["rest"] == pytest.approx(
        2.0
    )
    assert result["by_label_us"]["persistent Triton (batch-invariant)"] == pytest.approx(430.0)
    assert result["small_m_route"] == {"kernels_per_cycle": 0.0, "us_per_cycle": 0.0}
    # the first draft (before the first verify) and the last verify + bookkeeping are partial cycles
    assert result["left_out"] == {"edge_kernels": 4 + 6 + 2, "unattributed_kernels": 0}
    assert result["top_kernels"][0]["name"] == "matmul_kernel_persistent"
    assert result["top_kernels"][0]["launches_per_cycle"] == pytest.approx(2.0)
    assert 0 < us["busy"] <= us["span"]


def test_decode_cycles_and_plain_json(tmp_path: Path) -> None:
    path = _trace(tmp_path, perf_traces.DECODE_ITERATION, iterations=5, gz=False)
    result = breakdown.analyse(breakdown.load_events(path))
    assert result["anchor"] == "DECODE" and result["cycles"] == 4
    us = result["per_cycle_us"]
    assert (us["gemm"], us["gdn"], us["attention"], us["rest"]) == pytest.approx((300.0, 40.0, 10.0, 9.0))
    assert result["by_label_us"]["cuBLAS / CUTLASS"] == pytest.approx(300.0)
    assert result["by_step_us"]["between"]["rest"] == pytest.approx(1.0)  # the memcpy


def test_small_m_route_is_reported_on_its_own(tmp_path: Path) -> None:
    iteration = [
        (kind, [("_small_m_gemm_kernel" if n == "matmul_kernel_persistent" else n, d) for n, d in kernels])
        for kind, kernels in perf_traces.SPEC_ITERATION
    ]
    result = breakdown.analyse(breakdown.load_events(_trace(tmp_path, iteration, iterations=3)))
    assert result["small_m_route"] == {"kernels_per_cycle": 2.0, "us_per_cycle": pytest.approx(430.0)}
    assert result["per_cycle_us"]["gemm"] == pytest.approx(430.0)


def test_kernels_without_a_launch_are_counted_not_placed(tmp_path: Path) -> None:
    path = _trace(tmp_path, perf_traces.DECODE_ITERATION, iterations=3)
    events = breakdown.load_events(path)
    for e in events:
        if e.get("cat") == "kernel" and e["name"] == "FusedAddRMSNormKernel":
            e["args"]["correlation"] = 99_999_999  # no launch carries it
    result = breakdown.analyse(events)
    assert result["left_out"]["unattributed_kernels"] == 3
    assert result["per_cycle_us"]["rest"] == pytest.approx(1.0)


def test_a_cpu_only_trace_is_refused_with_the_fix(tmp_path: Path) -> None:
    trace = perf_traces.cpu_trace(tmp_path / "cpu.json", 2, ["DECODE"])
    with pytest.raises(breakdown.TraceError, match=r"activities CPU and GPU"):
        breakdown.analyse(trace["traceEvents"])


def test_a_trace_without_step_spans_is_refused(tmp_path: Path) -> None:
    path = _trace(tmp_path, perf_traces.DECODE_ITERATION, iterations=3)
    events = [e for e in breakdown.load_events(path) if e.get("cat") != "user_annotation"]
    with pytest.raises(breakdown.TraceError, match="CPU activity"):
        breakdown.analyse(events)
    one = _trace(tmp_path, perf_traces.DECODE_ITERATION, iterations=1)
    with pytest.raises(breakdown.TraceError, match="one DECODE step only"):
        breakdown.analyse(breakdown.load_events(one))


def test_cli_writes_json_and_markdown(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _trace(tmp_path, perf_traces.SPEC_ITERATION, iterations=3)
    assert (
        breakdown.main([str(path), "--json", str(tmp_path / "b.json"), "--markdown", str(tmp_path / "b.md")])
        == 0
    )
    assert json.loads((tmp_path / "b.json").read_text())["cycles"] == 2
    text = (tmp_path / "b.md").read_text()
    assert "| gemm | 430.0 | 30.0 | 400.0 | 0.0 |" in text and "Small-M route: 0.0 kernels" in text
    assert "| **total** | **533.0** | 37.0 | 488.0 | 8.0 |" in text
    assert breakdown.main([str(tmp_path / "missing.json")]) == 2
    assert "not a readable Chrome trace" in capsys.readouterr().err


# The committed profiles of the lent card's runs (docs/evidence/perf-*), analysed again: a breakdown rule
# changed without re-analysing the traces, or a trace unpacked incompletely, shows here.
COMMITTED = sorted((REPO / "docs" / "evidence").glob("perf-*/*/breakdown*.json"))


def _committed_trace(kept: Path) -> Path:
    """A breakdown's trace: profile/<server> for the single profile of earlier runs, else
    profile-<context>/<server>-<context>."""
    server = kept.parent.name
    if kept.name == "breakdown.json":
        return kept.parent / "profile" / f"{server}.trace.json.gz"
    length = kept.stem.split("-", 1)[1]
    return kept.parent / f"profile-{length}" / f"{server}-{length}.trace.json.gz"


@pytest.mark.evidence
@pytest.mark.parametrize("kept", COMMITTED, ids=lambda p: f"{p.parent.parent.name}-{p.parent.name}-{p.stem}")
def test_each_committed_breakdown_is_its_trace_analysed_again(kept: Path) -> None:
    saved = json.loads(kept.read_text())
    again = breakdown.analyse(breakdown.load_events(_committed_trace(kept)), source=saved["source"])
    assert again["cycles"] == saved["cycles"] == 5
    for key, value in saved["per_cycle_us"].items():
        assert again["per_cycle_us"][key] == pytest.approx(value, rel=1e-9), key
    assert again["small_m_route"] == saved["small_m_route"]


@pytest.mark.evidence
def test_the_lent_cards_profiles_are_committed() -> None:
    assert len(COMMITTED) >= 28, (
        "docs/evidence/perf-*/<server>/breakdown*.json: the runs' breakdowns are missing"
    )
