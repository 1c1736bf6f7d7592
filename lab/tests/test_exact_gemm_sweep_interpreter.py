"""The exact GEMM route's tile sweep (lab/kernels/bench_exact_gemm.py) end to end on a CPU under Triton
3.6's interpreter: bits, times, the fit, the table and the summary (its plumbing; the H200 measures). The
route's files come straight out of the series (checkhelpers.route_interpreter)."""

from __future__ import annotations

from pathlib import Path

import exact_gemm_table
import pytest
from checkhelpers import route_interpreter

FIXTURE_NEEDS = {"interpreter_env": ("network",)}


@pytest.fixture(scope="module")
def interpreter_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return route_interpreter.interpreter_env(tmp_path_factory.mktemp("exact-gemm-sweep"))


# The interpreter's dot is numpy's: its sums follow BLOCK_K, not the MMA instruction, so only candidates
# with the reference's K block (64) can match it bit for bit here.
SWEEP_CANDIDATES = [
    "tma-m64-n64-k64-g8-w4-s6-tiles",
    "tma-m64-n128-k64-g8-w4-s4-tiles",
    "kn-m128-n128-k64-g8-w8-s3-p1",
]


def test_the_sweep_runs_end_to_end(interpreter_env: dict[str, str], tmp_path: Path) -> None:
    """`python -m lab.kernels.bench_exact_gemm --interpret-cpu`: bits, times, the fit, the table and the
    summary, on a CPU (its plumbing; the H200 measures)."""
    out = tmp_path / "out"
    args = ["--interpret-cpu", "3,0", "--out", str(out), "--shapes", "80x304", "--ms", "8,48,512"]
    args += ["--bits-ms", "1,5,17", "--candidates", ",".join(SWEEP_CANDIDATES)]
    result = route_interpreter.run(interpreter_env, "-m", "lab.kernels.bench_exact_gemm", *args)
    log = result.stdout + result.stderr
    assert result.returncode == 0, log[-4000:]
    table = exact_gemm_table.load_table(out / "exact-gemm-sm00-3sm-0mib.json")
    assert table["complete"] and [(s["N"], s["K"]) for s in table["shapes"]] == [(80, 304)]
    (shape,) = table["shapes"]
    assert set(shape["bits"]) == set(SWEEP_CANDIDATES)
    assert all(v == "equal" for v in shape["bits"].values()), shape["bits"]
    assert set(shape["us"]) == {"8", "48", "512"}
    assert set(shape["us"]["8"]) == {"cublas", "persistent", "rule"}  # no candidate's BLOCK_M suits M = 8
    assert set(SWEEP_CANDIDATES) <= set(shape["us"]["48"]) and set(SWEEP_CANDIDATES) <= set(
        shape["us"]["512"]
    )
    fitted = table.get("rule_fitted")
    assert fitted, table.get("fit_error")
    assert [b["max_m"] for b in fitted["buckets"]] == [48, None]  # its Ms: 48 and 512
    summary = (out / "summary.txt").read_text()
    assert "the shipped rule" in summary and "fitted rule:" in summary
    assert (out / "progress.jsonl").read_text().count('"stage": "bits"') == 1
