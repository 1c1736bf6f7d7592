"""Issues 11, 18 and 26's figures: every table in docs/performance.md (and, for earlier runs, in their
evidence folder's results.md) comes from the committed H200 results, through the committed commands.
Re-deriving them here catches a page edited by hand, a breakdown rule changed without re-analysing the
traces, and evidence unpacked incompletely."""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RUNS = sorted((REPO / "docs" / "evidence").glob("perf-h200-*"))
PAGE = REPO / "docs" / "performance.md"
sys.path.insert(0, str(REPO / "bench" / "perf"))
import breakdown  # noqa: E402
import prefill  # noqa: E402
import run  # noqa: E402


def test_every_run_is_here() -> None:
    assert [run.name for run in RUNS] == [
        "perf-h200-2026-11-30",
        "perf-h200-2026-12-01",
        "perf-h200-2026-12-01-long-context",
        "perf-h200-2026-12-01-shipped-rule",
        "perf-h200-2026-12-02-reuse",
        "perf-h200-2026-12-02-targets",
        "perf-h200-2026-12-03-closing",
        "perf-h200-2026-12-03-loop-stages",
        "perf-h200-2026-12-03-prefill640",
    ]


@pytest.mark.parametrize("evidence", RUNS, ids=lambda p: p.name)
def test_the_summary_is_what_summarize_writes_from_the_results(evidence: Path) -> None:
    assert (evidence / "summary.md").read_text() == run.summarize(evidence)


def _trace(kept: Path) -> Path:
    """A breakdown's trace: profile/<server> for the single profile of earlier runs, else
    profile-<context>/<server>-<context>."""
    server = kept.parent.name
    if kept.name == "breakdown.json":
        return kept.parent / "profile" / f"{server}.trace.json.gz"
    length = kept.stem.split("-", 1)[1]
    return kept.parent / f"profile-{length}" / f"{server}-{length}.trace.json.gz"


@pytest.mark.parametrize(
    "kept",
    [
        path
        for e in RUNS
        for name in run.SERVERS
        if (e / name).is_dir()
        for path in run.breakdown_files(e / name).values()
    ],
    ids=lambda p: f"{p.parent.parent.name}-{p.parent.name}-{p.stem}",
)
def test_each_breakdown_is_its_trace_analysed_again(kept: Path) -> None:
    again = breakdown.analyse(
        breakdown.load_events(_trace(kept)), source=json.loads(kept.read_text())["source"]
    )
    kept = json.loads(kept.read_text())
    assert again["cycles"] == kept["cycles"] == 5
    for key, value in kept["per_cycle_us"].items():
        assert again["per_cycle_us"][key] == pytest.approx(value, rel=1e-9), key
    assert again["small_m_route"] == kept["small_m_route"]


@pytest.mark.parametrize(
    "folder",
    [e / name for e in RUNS for name in run.SERVERS if (e / name / "prefill.json").exists()],
    ids=lambda p: f"{p.parent.name}-{p.name}",
)
def test_each_prefill_is_its_trace_analysed_again(folder: Path) -> None:
    kept = json.loads((folder / "prefill.json").read_text())
    trace = folder / "prefill" / f"{folder.name}.prefill.trace.json.gz"
    again = prefill.analyse(breakdown.load_events(trace), source=kept["source"])
    assert again["us"] == pytest.approx(kept["us"], rel=1e-9)
    assert again["gemm_sequence"] == kept["gemm_sequence"] and again["steps"] == kept["steps"]
    # the prefill's tokens in the recipe's 8192-token chunks (32768 where run.json predates the field)
    tokens = json.loads((folder / "run.json").read_text()).get("prefill_prompt", 32768)
    assert kept["extend_tokens"] == [8192] * (tokens // 8192) + ([tokens % 8192] if tokens % 8192 else [])


def _server_args(log: Path) -> dict:
    line = next(x for x in log.read_text().splitlines() if "server_args={" in x)
    return ast.literal_eval(line.split("server_args=", 1)[1])


@pytest.mark.parametrize("evidence", RUNS, ids=lambda p: p.name)
def test_every_server_ran_what_its_name_says(evidence: Path) -> None:
    ran = {name: spec for name, spec in run.SERVERS.items() if (evidence / name).is_dir()}
    assert len(ran) >= 2, sorted(ran)
    for name, spec in ran.items():
        folder = evidence / name
        meta = json.loads((folder / "meta.json").read_text())
        assert meta["ok"], name
        if (folder / "bench.json").exists():
            identity = json.loads((folder / "bench.json").read_text())["identity"]
            assert identity["enable_deterministic_inference"] is (spec.tree == "patched"), name
            assert (identity["speculative_algorithm"] == "DFLASH") is spec.speculative, name
            assert "--load-format dummy" in identity["launch_command"], name
        else:  # a server that measured prefix reuse alone: its log's server_args say what ran
            args = _server_args(folder / "server.log.head-tail")
            assert args["enable_deterministic_inference"] is (spec.tree == "patched"), name
            assert (args["speculative_algorithm"] == "DFLASH") is spec.speculative, name
            assert args["load_format"] == "dummy", name
            assert args["disable_radix_cache"] is False and (folder / "reuse.json").exists(), name
        if not (folder / "run.json").exists():  # a run cut by the end of the device time (its calls.md)
            assert (evidence / name, evidence.name) == (folder, "perf-h200-2026-12-01-long-context")
            continue
        run_json = json.loads((folder / "run.json").read_text())
        assert run_json["variant"] == spec.variant and run_json["tree"] == spec.tree, name


CURRENT = REPO / "docs" / "evidence" / "perf-h200-2026-12-03-closing"
# the prompt lengths each run's bench measured (the prefix-reuse run has no bench)
LENGTHS = {
    "perf-h200-2026-11-30": 4,
    "perf-h200-2026-12-01": 3,
    "perf-h200-2026-12-01-long-context": 4,
    "perf-h200-2026-12-01-shipped-rule": 4,
    "perf-h200-2026-12-02-targets": 4,
    "perf-h200-2026-12-03-closing": 4,
    "perf-h200-2026-12-03-loop-stages": 2,
    "perf-h200-2026-12-03-prefill640": 1,
}


def test_every_run_with_a_bench_has_its_lengths_said() -> None:
    assert sorted(LENGTHS) == [e.name for e in RUNS if (e / "summary.md").read_text().startswith("## Decode")]


@pytest.mark.parametrize(
    ("evidence", "lengths"),
    [(e, LENGTHS[e.name]) for e in RUNS if e.name in LENGTHS],
    ids=lambda v: getattr(v, "name", v),
)
def test_the_page_holds_the_measured_tables(evidence: Path, lengths: int) -> None:
    """The current run's tables on docs/performance.md, an earlier run's on its own results.md."""
    page = (PAGE if evidence == CURRENT else evidence / "results.md").read_text()
    summary = (evidence / "summary.md").read_text()
    tables = [line for line in summary.splitlines() if line.startswith("| ")]
    first = summary.split("\n\n- ")[0]  # the decode and TTFT table, before the servers' notes
    bench_rows = [
        line for line in first.splitlines() if line.startswith("| ") and line.split("|")[1].strip().isdigit()
    ]
    assert len(bench_rows) == lengths  # 640, 2200, 32768 and 131072 at most; LENGTHS says how many
    for line in bench_rows + [line for line in tables if line.startswith("| **total**")]:
        assert line in page, f"{evidence.name}: its page lacks the measured row: {line}"
    assert "not yet measured" not in page.lower()


def test_summarize_runs_as_a_command() -> None:
    """`python bench/perf/run.py summarize DIR` in a fresh Python prints the committed summary."""
    import subprocess

    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "perf" / "run.py"), "summarize", str(RUNS[-1])],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == (RUNS[-1] / "summary.md").read_text()
