"""lab/perf/targets.py: the recipe's performance targets judged from a results folder. On folders
written here, every target is met with its inputs exactly on its bound and missed with one input moved just
past it, and an input not measured is said, never judged (the "every length" target included). The
committed campaign's table is its evidence folder's targets.md, regenerated and quoted on
docs/performance.md (docs/evidence/perf-h200-2026-12-03-closing/claims.json)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from lab.perf import targets

REPO = Path(__file__).resolve().parents[2]


def _write(folder: Path, server: str, rates: dict[int, tuple[float, float]], attention: dict | None) -> None:
    """bench.json rows (t/s, TTFT) and, for ATTENTION, a 131072-token breakdown as run.py writes them."""
    (folder / server).mkdir(parents=True, exist_ok=True)
    rows = [{"prompt_tokens": n, "decode_tps": tps, "ttft_s": ttft} for n, (tps, ttft) in rates.items()]
    (folder / server / "bench.json").write_text(json.dumps({"rows": rows}))
    if attention is not None:
        (folder / server / "breakdown-131072.json").write_text(json.dumps(attention))


# A campaign in which every target sits exactly on its bound: 39 / 13 = 3.0, 39 / 60 = 0.65, 51 / 60 =
# 0.85, 3 ms of drafter attention, verify 1.5 x decode's 1 ms, exact = stock-spec at every length, TTFT
# 1.05 x stock's, 97 / 100 = 0.97. Each entry of PAST moves one input just past its bound.
AT_BOUND: dict[str, float] = {
    "exact-spec 640": 60.0,
    "exact-spec 2200": 60.0,
    "exact-spec 32768": 51.0,
    "exact-spec 131072": 39.0,
    "exact-spec TTFT": 1.05,
    "draft us": 3000.0,
    "verify us": 1500.0,
    "exact-no-spec 131072": 13.0,
    "exact-no-spec 640": 97.0,
    "stock-no-spec 640": 100.0,
    "stock-spec 640": 60.0,
}
PAST: dict[str, tuple[float, list[bool]]] = {  # the input moved, and which targets are met then
    "exact-no-spec 131072": (13.01, [False, True, True, True, True, True, True, True]),
    "exact-spec 2200": (60.01, [True, False, False, True, True, True, True, True]),
    "exact-spec 32768": (50.99, [True, True, False, True, True, True, True, True]),
    "draft us": (3000.1, [True, True, True, False, True, True, True, True]),
    "verify us": (1500.1, [True, True, True, True, False, True, True, True]),
    "stock-spec 640": (60.01, [True, True, True, True, True, False, True, True]),
    "exact-spec TTFT": (1.0501, [True, True, True, True, True, True, False, True]),
    "stock-no-spec 640": (100.01, [True, True, True, True, True, True, True, False]),
}


def _campaign(folder: Path, v: dict[str, float]) -> Path:
    exact = {n: (v[f"exact-spec {n}"], v["exact-spec TTFT"]) for n in (640, 2200, 32768, 131072)}
    steps = {"DRAFT": {"attention": v["draft us"]}, "VERIFY": {"attention": v["verify us"]}}
    _write(folder, "exact-spec", exact, {"by_step_us": steps})
    no_spec = {640: (v["exact-no-spec 640"], 1.0), 131072: (v["exact-no-spec 131072"], 1.0)}
    _write(folder, "exact-no-spec", no_spec, {"per_cycle_us": {"attention": 1000.0}})
    _write(folder, "stock-no-spec", {640: (v["stock-no-spec 640"], 1.0)}, None)
    stock = {n: (rate, 1.0) for n, (rate, _) in exact.items()} | {640: (v["stock-spec 640"], 1.0)}
    _write(folder, "stock-spec", stock, None)
    return folder


def _met(folder: Path) -> list[bool | None]:
    rows, cycles = targets.load(folder)
    return [None if r is None else r.met for _, r, _ in targets.judge_all(rows, cycles, "exact-spec")]


def test_every_bound_is_met_at_its_value(tmp_path: Path) -> None:
    assert _met(_campaign(tmp_path, AT_BOUND)) == [True] * len(targets.TARGETS)


@pytest.mark.parametrize("moved", sorted(PAST))
def test_each_bound_is_missed_just_past_it(tmp_path: Path, moved: str) -> None:
    value, met = PAST[moved]
    assert _met(_campaign(tmp_path, AT_BOUND | {moved: value})) == met


def test_every_target_is_missed_by_some_input_just_past_its_bound() -> None:
    assert all(any(not met[i] for _, met in PAST.values()) for i in range(len(targets.TARGETS)))


def test_an_input_not_measured_is_said_and_not_judged(tmp_path: Path) -> None:
    folder = _campaign(tmp_path, AT_BOUND)
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
    folder = _campaign(tmp_path, AT_BOUND)
    _write(folder, "exact-spec-window", {32768: (54.0, 1.0), 131072: (42.0, 1.0)}, None)
    table = targets.markdown(folder)
    assert table.splitlines()[0] == "| target | exact-spec | met | exact-spec-window | met |"
    assert "| 0.700 (42.0 / 60.0 t/s) (over exact-spec's 2200 rate) | yes |" in table
    # "at every length" names the length the variant did not run instead of judging the others
    assert "| not measured (exact-spec-window at 640 tokens) | - |" in table


@pytest.mark.parametrize("argument", ["missing-folder", "file"])
def test_the_command_refuses_what_is_not_a_results_folder(tmp_path: Path, argument: str) -> None:
    path = tmp_path / argument
    if argument == "file":
        path.write_text("{}")
    done = subprocess.run(
        [sys.executable, "-m", "lab.perf.targets", str(path)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and "is not a folder" in done.stderr
