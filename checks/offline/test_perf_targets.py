"""bench/perf/targets.py: issue 26's targets judged from a results folder. The committed H200 campaign's
table is the one docs/performance.md holds; on folders written here, each bound is met exactly at its
value and missed just past it, and an input not measured is said, never judged."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CURRENT = REPO / "docs" / "evidence" / "perf-h200-2026-12-02-targets"
sys.path.insert(0, str(REPO / "bench" / "perf"))
import targets  # noqa: E402


def test_the_page_holds_the_current_campaigns_targets() -> None:
    page = (REPO / "docs" / "performance.md").read_text()
    table = targets.markdown(CURRENT)
    assert table in page, "docs/performance.md lacks `python bench/perf/targets.py " + str(CURRENT) + "`"


def test_the_current_campaign_measured_every_input_of_the_recipes_targets() -> None:
    rows, cycles = targets.load(CURRENT)
    judged = targets.judge_all(rows, cycles, "exact-spec")
    assert all(reading is not None for _, reading, _ in judged), [m for _, _, m in judged if m]


def _write(folder: Path, server: str, rates: dict[int, tuple[float, float]], attention: dict | None) -> None:
    """bench.json rows (t/s, TTFT) and, for ATTENTION, a 131072-token breakdown as run.py writes them."""
    (folder / server).mkdir(parents=True, exist_ok=True)
    rows = [{"prompt_tokens": n, "decode_tps": tps, "ttft_s": ttft} for n, (tps, ttft) in rates.items()]
    (folder / server / "bench.json").write_text(json.dumps({"rows": rows}))
    if attention is not None:
        (folder / server / "breakdown-131072.json").write_text(json.dumps(attention))


def _campaign(tmp_path: Path, exact_131072: float, draft_us: float, verify_us: float) -> Path:
    _write(
        tmp_path,
        "exact-spec",
        {640: (200.0, 1.0), 2200: (200.0, 1.0), 32768: (170.0, 1.05), 131072: (exact_131072, 1.0)},
        {"by_step_us": {"DRAFT": {"attention": draft_us}, "VERIFY": {"attention": verify_us}}},
    )
    _write(
        tmp_path,
        "exact-no-spec",
        {640: (97.0, 1.0), 131072: (50.0, 1.0)},
        {"per_cycle_us": {"attention": 1000.0}},
    )
    _write(tmp_path, "stock-no-spec", {640: (100.0, 1.0)}, None)
    _write(tmp_path, "stock-spec", {n: (100.0, 1.0) for n in (640, 2200, 32768, 131072)}, None)
    return tmp_path


def _met(folder: Path) -> list[bool | None]:
    rows, cycles = targets.load(folder)
    return [None if r is None else r.met for _, r, _ in targets.judge_all(rows, cycles, "exact-spec")]


def test_every_bound_is_met_at_its_value(tmp_path: Path) -> None:
    # 150 / 50 = 3.0 but 150 / 200 = 0.75 >= 0.65; 32768: 0.85; 3 ms; 1.5 x 1 ms; TTFT 1.05 at 32768
    assert _met(_campaign(tmp_path, 150.0, 3000.0, 1500.0)) == [True] * 8


def test_each_bound_is_missed_just_past_it(tmp_path: Path) -> None:
    met = _met(_campaign(tmp_path, 149.9, 3000.1, 1500.1))
    assert met == [False, True, True, False, False, True, True, True]


def test_an_input_not_measured_is_said_and_not_judged(tmp_path: Path) -> None:
    folder = _campaign(tmp_path, 150.0, 3000.0, 1500.0)
    (folder / "exact-no-spec" / "breakdown-131072.json").unlink()
    (folder / "stock-no-spec" / "bench.json").unlink()
    rows, cycles = targets.load(folder)
    judged = targets.judge_all(rows, cycles, "exact-spec")
    missing = {t.text: m for t, r, m in judged if r is None}
    assert missing == {
        "verify attention at 131072 <= 1.5 x one exact decode step's attention": (
            "exact-no-spec's profile at 131072 tokens"
        ),
        "exact-no-spec at 640 >= 0.97 x stock-no-spec at 640": "stock-no-spec at 640 tokens",
    }
    assert "| not measured (stock-no-spec at 640 tokens) | - |" in targets.markdown(folder)


def test_the_window_variant_is_judged_over_exact_specs_2200_rate_and_says_so(tmp_path: Path) -> None:
    folder = _campaign(tmp_path, 150.0, 3000.0, 1500.0)
    _write(folder, "exact-spec-window", {32768: (180.0, 1.0), 131072: (160.0, 1.0)}, None)
    table = targets.markdown(folder)
    assert table.splitlines()[0] == "| target | exact-spec | met | exact-spec-window | met |"
    assert "0.800 (160.0 / 200.0 t/s) (over exact-spec's 2200 rate) | yes |" in table


@pytest.mark.parametrize("argument", ["missing-folder", "file"])
def test_the_command_refuses_what_is_not_a_results_folder(tmp_path: Path, argument: str) -> None:
    path = tmp_path / argument
    if argument == "file":
        path.write_text("{}")
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "perf" / "targets.py"), str(path)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and "is not a folder" in done.stderr


def test_the_command_prints_the_committed_table() -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "perf" / "targets.py"), str(CURRENT)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0 and done.stdout == targets.markdown(CURRENT)
