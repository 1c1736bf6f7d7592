"""lab/perf/prefill.py: a prefill's GPU time by component and GEMM by GEMM, from a real torch.profiler
trace recorded here on the CPU with `record_shapes` (so the ops' "Input Dims" are torch's own), carrying
GPU events in Kineto's schema (checkhelpers/perf_traces.py says where each field comes from)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from checkhelpers import perf_traces

from lab.perf import breakdown, prefill

REPO = Path(__file__).resolve().parents[2]


def _trace(tmp_path: Path, kernel: str, us_per_column: float, chunks: int = 3) -> list[dict]:
    cpu = perf_traces.prefill_cpu_trace(tmp_path / f"{kernel}.json", chunks)
    return perf_traces.add_prefill_gpu(cpu, kernel, us_per_column)["traceEvents"]


def test_the_real_profiler_records_the_dims_the_shapes_come_from(tmp_path: Path) -> None:
    events = perf_traces.prefill_cpu_trace(tmp_path / "cpu.json", 1)["traceEvents"]
    dims = {e["name"]: e["args"]["Input Dims"] for e in events if e.get("cat") == "cpu_op"}
    assert dims["aten::addmm"] == [[48], [64, 32], [32, 48], [], []]
    assert dims["aten::mm"] == [[64, 48], [48, 32]]
    assert prefill.gemm_shape("aten::addmm", tuple(map(tuple, dims["aten::addmm"]))) == (64, 48, 32)
    assert prefill.gemm_shape("aten::mm", tuple(map(tuple, dims["aten::mm"]))) == (64, 32, 48)


@pytest.mark.parametrize(
    ("op", "dims", "shape"),
    [
        ("aten::linear", ((4, 16, 32), (48, 32), (48,)), (64, 48, 32)),
        ("aten::matmul", ((64, 32), (32, 48)), (64, 48, 32)),
        ("aten::matmul", ((2, 64, 32), (2, 32, 48)), None),  # batched right operand: no weight
        ("aten::bmm", ((2, 64, 32), (2, 32, 48)), (128, 48, 32)),
        ("aten::baddbmm", ((2, 64, 48), (2, 64, 32), (2, 32, 48)), (128, 48, 32)),
        ("aten::mm", ((64,),), None),
    ],
)
def test_gemm_shapes_from_input_dims(op: str, dims: tuple, shape: tuple | None) -> None:
    assert prefill.gemm_shape(op, dims) == shape


def test_each_gemm_kernel_lands_under_its_weight(tmp_path: Path) -> None:
    result = prefill.analyse(_trace(tmp_path, "_exact_gemm_kernel", 2.0), source="exact")
    assert result["steps"] == {"EXTEND": 3} and result["extend_tokens"] == [64, 64, 64]
    weights = result["gemm_by_weight"]
    assert list(weights) == ["N=48 K=32", "N=32 K=48"]  # most time first
    assert weights["N=48 K=32"] == {
        "us": pytest.approx(3 * 48 * 2.0),
        "kernels": 3,
        "m": {"64": 3},
        "labels": {breakdown.EXACT_GEMM_LABEL: pytest.approx(288.0)},
    }
    assert weights["N=32 K=48"]["us"] == pytest.approx(3 * 32 * 2.0)
    us = result["us"]
    assert (us["gemm"], us["attention"], us["gdn"], us["rest"]) == pytest.approx((480.0, 300.0, 150.0, 0.0))
    assert us["total"] == pytest.approx(930.0) and 0 < us["busy"] <= us["span"]


def test_exact_against_stock_weight_by_weight(tmp_path: Path) -> None:
    exact = prefill.analyse(_trace(tmp_path, "_exact_gemm_kernel", 2.2))
    stock = prefill.analyse(_trace(tmp_path, "nvjet_sm90_tst_128x256_64x4_1x2_h_bz_coopA_TNT", 2.0))
    assert stock["by_label_us"]["cuBLAS / CUTLASS"] == pytest.approx(480.0)
    table = prefill.compare(exact, stock, ("exact-no-spec", "stock-no-spec"))
    assert "| N=48 K=32 | 0.3 | 0.3 | 1.10 |" in table
    assert "| **gemm** | 0.5 | 0.5 | 1.10 |" in table
    assert "| **attention** | 0.3 | 0.3 | 1.00 |" in table


def test_a_gemm_without_an_enclosing_op_is_kept_apart(tmp_path: Path) -> None:
    events = _trace(tmp_path, "_exact_gemm_kernel", 1.0, chunks=1)
    kernel = next(e for e in events if e.get("name") == "_exact_gemm_kernel")
    launch = next(
        e
        for e in events
        if e.get("cat") == "cuda_driver" and e["args"]["correlation"] == kernel["args"]["correlation"]
    )
    launch["ts"] = min(e["ts"] for e in events if e.get("cat") == "user_annotation") - 1.0
    weights = prefill.analyse(events)["gemm_by_weight"]
    assert weights[prefill.NO_SHAPE]["kernels"] == 1 and weights[prefill.NO_SHAPE]["m"] == {}


def test_a_trace_without_shapes_or_kernels_is_refused_with_the_fix(tmp_path: Path) -> None:
    events = _trace(tmp_path, "_exact_gemm_kernel", 1.0, chunks=1)
    for e in events:
        if e.get("cat") == "cpu_op":
            e.get("args", {}).pop("Input Dims", None)
    with pytest.raises(breakdown.TraceError, match='"record_shapes": true'):
        prefill.analyse(events)
    cpu_only = perf_traces.prefill_cpu_trace(tmp_path / "cpu.json", 1)["traceEvents"]
    with pytest.raises(breakdown.TraceError, match="activities CPU and GPU"):
        prefill.analyse(cpu_only)


def test_cli_writes_json_and_markdown(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "prefill.trace.json"
    path.write_text(json.dumps({"traceEvents": _trace(tmp_path, "_exact_gemm_kernel", 2.0)}))
    assert (
        prefill.main([str(path), "--json", str(tmp_path / "p.json"), "--markdown", str(tmp_path / "p.md")])
        == 0
    )
    assert json.loads((tmp_path / "p.json").read_text())["steps"] == {"EXTEND": 3}
    text = (tmp_path / "p.md").read_text()
    assert "| N=48 K=32 | 0.3 | 3 | 64 (3) |" in text and "extend chunks of 64, 64, 64 tokens" in text
    assert prefill.main([str(tmp_path / "missing.json")]) == 2
    assert "not a readable Chrome trace" in capsys.readouterr().err


def test_graph_replayed_gemms_are_paired_in_gpu_order(tmp_path: Path) -> None:
    """Kernels replayed from CUDA graphs have no op around them: the comparison pairs the two traces'
    GEMMs in GPU order, a cuBLAS split-K reduction counting with the product before it."""
    exact_events = _trace(tmp_path, "_exact_gemm_tma_kernel", 2.2)
    stock_events = _trace(tmp_path, "nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coopB_TNT", 2.0)
    first = min(
        (e for e in stock_events if e.get("cat") == "kernel" and "nvjet" in e["name"]), key=lambda e: e["ts"]
    )
    reduce = dict(first, name="void cublasLt::splitKreduce_kernel<32, 16, int, float>", dur=3.0)
    reduce["ts"] = first["ts"] + first["dur"] + 0.1
    stock_events.append(reduce)
    for e in exact_events:  # the exact route's grid: its tile count, one per weight here
        if e.get("name") == "_exact_gemm_tma_kernel":
            e["args"]["grid"] = [round(e["dur"] / 2.2 / 16), 1, 1]
    exact, stock = prefill.analyse(exact_events), prefill.analyse(stock_events)
    assert len(exact["gemm_sequence"]) == len(stock["gemm_sequence"]) == 6
    assert stock["gemm_sequence"][0][2] == pytest.approx(48 * 2.0 + 3.0)  # the reduction joined its product
    table = prefill.aligned(exact, stock, ("exact-no-spec", "stock-no-spec"))
    assert "paired in GPU order (6 in each)" in table
    assert "| _exact_gemm_tma_kernel | 3x1x1 | 3 | 0.3 | 0.3 | 1.09 |" in table  # N=48: 316.8 vs 291 us
    assert "| _exact_gemm_tma_kernel | 2x1x1 | 3 | 0.2 | 0.2 | 1.10 |" in table  # N=32
    stock["gemm_sequence"].pop()
    assert "not possible (6 in exact-no-spec, 5 in stock-no-spec" in prefill.aligned(
        exact, stock, ("exact-no-spec", "stock-no-spec")
    )


COMMITTED = sorted((REPO / "docs" / "evidence").glob("perf-*/*/prefill.json"))


@pytest.mark.evidence
@pytest.mark.parametrize("kept", COMMITTED, ids=lambda p: f"{p.parent.parent.name}-{p.parent.name}")
def test_each_committed_prefill_is_its_trace_analysed_again(kept: Path) -> None:
    """The lent card's prefill profiles (docs/evidence/perf-*), analysed again."""
    folder = kept.parent
    saved = json.loads(kept.read_text())
    trace = folder / "prefill" / f"{folder.name}.prefill.trace.json.gz"
    again = prefill.analyse(breakdown.load_events(trace), source=saved["source"])
    assert again["us"] == pytest.approx(saved["us"], rel=1e-9)
    assert again["gemm_sequence"] == saved["gemm_sequence"] and again["steps"] == saved["steps"]
    # the prefill's tokens in the recipe's 8192-token chunks (32768 where run.json predates the field)
    tokens = json.loads((folder / "run.json").read_text()).get("prefill_prompt", 32768)
    assert saved["extend_tokens"] == [8192] * (tokens // 8192) + ([tokens % 8192] if tokens % 8192 else [])
    assert len(COMMITTED) >= 6
