"""Issue 11's figures: every table in docs/performance.md comes from the committed H200 results, through
the committed commands. Re-deriving them here catches a page edited by hand, a breakdown rule changed
without re-analysing the traces, and evidence unpacked incompletely."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EVIDENCE = REPO / "docs" / "evidence" / "perf-h200-2026-11-30"
PAGE = REPO / "docs" / "performance.md"
sys.path.insert(0, str(REPO / "bench" / "perf"))
import breakdown  # noqa: E402
import run  # noqa: E402


def test_the_summary_is_what_summarize_writes_from_the_results() -> None:
    assert (EVIDENCE / "summary.md").read_text() == run.summarize(EVIDENCE)


@pytest.mark.parametrize("server", [name for name in run.SERVERS if (EVIDENCE / name).is_dir()])
def test_each_breakdown_is_its_trace_analysed_again(server: str) -> None:
    folder = EVIDENCE / server
    trace = folder / "profile" / f"{server}.trace.json.gz"
    again = breakdown.analyse(
        breakdown.load_events(trace), source=json.loads((folder / "breakdown.json").read_text())["source"]
    )
    kept = json.loads((folder / "breakdown.json").read_text())
    assert again["cycles"] == kept["cycles"] == 5
    for key, value in kept["per_cycle_us"].items():
        assert again["per_cycle_us"][key] == pytest.approx(value, rel=1e-9), key
    assert again["small_m_route"] == kept["small_m_route"]


def test_every_server_ran_what_its_name_says() -> None:
    ran = {name: spec for name, spec in run.SERVERS.items() if (EVIDENCE / name).is_dir()}
    assert len(ran) >= 3, sorted(ran)
    for name, spec in ran.items():
        folder = EVIDENCE / name
        meta = json.loads((folder / "meta.json").read_text())
        assert meta["ok"], name
        identity = json.loads((folder / "bench.json").read_text())["identity"]
        assert identity["enable_deterministic_inference"] is (spec.tree == "patched"), name
        assert (identity["speculative_algorithm"] == "DFLASH") is spec.speculative, name
        assert "--load-format dummy" in identity["launch_command"], name
        run_json = json.loads((folder / "run.json").read_text())
        assert run_json["variant"] == spec.variant and run_json["tree"] == spec.tree, name


def test_the_page_holds_the_measured_tables() -> None:
    page, summary = PAGE.read_text(), (EVIDENCE / "summary.md").read_text()
    tables = [line for line in summary.splitlines() if line.startswith("| ")]
    bench_rows = [line for line in tables if line.split("|")[1].strip().isdigit()]
    assert len(bench_rows) == 4  # 640, 2200, 32768, 131072 prompt tokens
    for line in bench_rows + [line for line in tables if line.startswith("| **total**")]:
        assert line in page, f"docs/performance.md lacks the measured row: {line}"
    assert "not yet measured" not in page.lower()
