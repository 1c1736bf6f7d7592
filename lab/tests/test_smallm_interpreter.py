"""The small-M route's kernels and the H200 sweep script, run on a CPU under Triton 3.6's interpreter.

No GPU here, and the H200 gets one call: this runs, before it, everything the interpreter can run. The
route's files come straight out of the series (route_interpreter.py) into a bare tree, and the
released triton 3.6.0 wheel (the H200's Triton) runs them with TRITON_INTERPRET=1:
- `python -m lab.kernels.smallm_interpret`: every sweep kernel, persistent or not, computes a @ w.T,
  writes nothing outside its output, covers every tile, keeps rows independent of M, and falls back
  from TMA to pointers;
- `python -m lab.kernels.bench_smallm_sweep --interpret-cpu`: the sweep end to end (bits, times, fit, table,
  summary), and the table it writes is one the rule check (smallm_table.evaluate) reads.
The interpreter cannot multiply bfloat16 (triton-lang/triton#11584), so both use float16 operands of the
same size; bf16 bits and bandwidth are the GPU's to measure. numpy is pinned to 2.2.6 for the subprocesses:
triton 3.6's interpreter calls int() on one-element arrays (its `__index__`), which numpy 2.4 refuses.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import smallm_table
from checkhelpers import route_interpreter

FIXTURE_NEEDS = {"interpreter_env": ("network",)}


@pytest.fixture(scope="module")
def interpreter_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return route_interpreter.interpreter_env(tmp_path_factory.mktemp("smallm-interpreter"))


def test_every_sweep_kernel_computes_the_product(interpreter_env: dict[str, str]) -> None:
    result = route_interpreter.run(interpreter_env, "-m", "lab.kernels.smallm_interpret")
    log = result.stdout + result.stderr
    assert result.returncode == 0, log[-4000:]
    assert " 0 failures" in result.stdout, log[-4000:]


FIRST_ROUTE_HERE = "kn-n16-k256-w4-s4-p4"  # the first route's config for (80, 304) on 4 SMs
# The shipped rule's choice there (its `small` config: 48 KB of weights, 3 tiles of 32 for 4 SMs).
RULE_HERE = "nk-n16-k256-w4-s6-tiles"
CANDIDATES = [FIRST_ROUTE_HERE, RULE_HERE, "tma-n16-k256-w4-s6-tiles", "nk-n16-k256-w4-s6-f-p1"]


def test_sweep_runs_end_to_end(interpreter_env: dict[str, str], tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = ["--interpret-cpu", "4,65536", "--out", str(out), "--shapes", "80x304"]
    args += ["--candidates", ",".join(CANDIDATES), "--sweep-ms", "1,16", "--all-ms", "1,2"]
    result = route_interpreter.run(interpreter_env, "-m", "lab.kernels.bench_smallm_sweep", *args)
    log = result.stdout + result.stderr
    assert result.returncode == 0, log[-4000:]
    table = smallm_table.load_table(out / "smallm-sm00-4sm-0mib.json")
    assert table["complete"] and [(s["N"], s["K"]) for s in table["shapes"]] == [(80, 304)]
    for shape in table["shapes"]:
        assert set(shape["results"]) == set(CANDIDATES), shape.get("error", "")
        first = shape["results"][FIRST_ROUTE_HERE]
        assert first["bits"] == "equal" and set(first["us"]) == {"1", "16"}, first
        assert shape["first_route_batch_invariant"]
        assert set(shape["all_m"]["cublas"]) == {"1", "2"}
    assert "rule_fitted" in table, table.get("fit_error")
    tiles = smallm_table.load_tiles_module()
    rows = smallm_table.evaluate(table, tiles.choose, tiles.check_config)
    assert [(r["chosen"], r["chosen_ok"]) for r in rows] == [(RULE_HERE, True)]
    summary = (out / "summary.txt").read_text()
    assert "(80, 304)" in summary and "fitted rule on this table" in summary
    assert "target (188 SMs, 128 MiB)" in summary
    assert (out / "progress.jsonl").read_text().count('"stage": "bits"') == 1
