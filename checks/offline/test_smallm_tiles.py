"""The small-M route's tile and launch choice (patch 0004's small_m_tiles.py) against the sweep and its data.

small_m_tiles.py uses the standard library only, so it is read straight out of the patch and run here. The
rule may only return configs the GPU sweep measures (checks/gpu/smallm_plan.py: their bits are checked
against the first route on the H200 before they are timed), each must fit the 99 KB of shared memory an
SM120 program gets, and on every committed sweep table (docs/evidence/smallm-<card>-<date>/, written by
lab/kernels/bench_smallm_sweep.py) its choice must be a bit-equal candidate within a few percent of the best
one measured, and not more than 3% slower than cuBLAS on shapes of at least twice the L2.
The table checker itself is tested on small tables built here.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
import smallm_plan
import smallm_table
from checkhelpers.released_wheels import REPO_ROOT

TILES = smallm_table.load_tiles_module()
TABLES = smallm_table.committed_tables()
NO_TABLE = (
    "no measured table under docs/evidence/smallm-<card>-<date>/: run lab/kernels/smallm_sweep.sh on "
    "the H200 and commit the smallm-*.json it writes to $OUT there"
)


def _candidates_full() -> list[dict]:
    return [TILES.check_config(c) for c in smallm_plan.candidates().values()]


def test_rule_returns_only_sweep_candidates() -> None:
    measured = _candidates_full()
    missing = [c for c in TILES.possible_configs() if TILES.check_config(c) not in measured]
    assert not missing, (
        f"small_m_tiles.RULE can return configs the sweep never checks: {missing}; add their kernels to "
        "checks/gpu/smallm_plan.KERNELS and rerun the sweep before shipping them"
    )


def test_every_candidate_fits_sm120_shared_memory() -> None:
    too_big = {
        cid: TILES.shared_bytes(config)
        for cid, config in smallm_plan.candidates().items()
        if TILES.shared_bytes(config) > TILES.SHARED_LIMIT_SM120
    }
    assert not too_big, f"candidates needing more than {TILES.SHARED_LIMIT_SM120} bytes: {too_big}"


def test_check_config_names_a_bad_key() -> None:
    with pytest.raises(ValueError, match="BLOCK_Q"):
        TILES.check_config({"BLOCK_N": 16, "BLOCK_K": 256, "BLOCK_Q": 1})
    with pytest.raises(ValueError, match="TMA box"):
        TILES.check_config({"LOAD": "tma", "BLOCK_N": 16, "BLOCK_K": 512})


def _shape(n: int, k: int, large: bool, times: dict[str, float | None], cublas: float, bits=None) -> dict:  # noqa: ANN001
    bits = bits or {}
    return {
        "N": n,
        "K": k,
        "large": large,
        "cublas_us": {"1": cublas, "16": cublas},
        "results": {
            cid: {"bits": bits.get(cid, "equal"), "us": None if us is None else {"1": us, "16": us}}
            for cid, us in times.items()
        },
    }


def _table(shapes: list[dict], ids: list[str]) -> dict:
    every = smallm_plan.candidates()
    return {
        "schema": smallm_table.SCHEMA,
        "device": {"sm_count": 132, "l2_bytes": 60 << 20},
        "sweep_ms": [1, 16],
        "candidates": {cid: every[cid] for cid in ids},
        "shapes": shapes,
    }


SLOW, FAST, WRONG = "kn-n16-k256-w4-s4-p4", "tma-n16-k256-w4-s6-p1", "tma-n16-k128-w4-s8-p2"


def _synthetic() -> dict:
    """Two large shapes of N = 5120 (16-wide tiles under a fill rule of 4 tiles per SM) and one small one:
    FAST is fastest among the candidates that keep the bits; WRONG is faster still but changes them."""
    times = {SLOW: 100.0, FAST: 90.0, WRONG: 50.0}
    bits = {WRONG: "differs: M=3 from the first route"}
    shapes = [
        _shape(5120, 17408, True, times, cublas=95.0, bits=bits),
        _shape(5120, 12288, True, times, cublas=95.0, bits=bits),
        _shape(512, 5120, False, {SLOW: 10.0, FAST: 12.0, WRONG: 5.0}, cublas=8.0, bits=bits),
    ]
    return _table(shapes, [SLOW, FAST, WRONG])


def _rule_choosing(cid: str):  # noqa: ANN202
    config = smallm_plan.candidates()[cid]
    return lambda n, k, sms, l2: dict(config)


def test_checker_flags_a_slower_choice_and_accepts_the_best() -> None:
    table = _synthetic()
    slow = smallm_table.evaluate(table, _rule_choosing(SLOW), TILES.check_config)
    assert [round(r["regret"], 3) for r in slow if r["large"]] == [1.111, 1.111]
    assert all(r["best"] == FAST for r in slow if r["large"]), (
        "a candidate that changes the bits counted as best"
    )
    fast = smallm_table.evaluate(table, _rule_choosing(FAST), TILES.check_config)
    assert [r["regret"] for r in fast if r["large"]] == [1.0, 1.0]
    assert [round(r["vs_cublas"], 3) for r in fast if r["large"]] == [0.947, 0.947]
    said = smallm_table.verdicts(slow)  # 100 us: 11% behind FAST and 5% behind cuBLAS on both large shapes
    assert sum("best bit-equal" in v for v in said) == 2 and sum("cuBLAS" in v for v in said) == 2, said
    small = "(512, 5120): the rule picks tma-n16-k256-w4-s6-p1 (12.0 us), best bit-equal kn-n16-k256-w4-s4-p4"
    assert [v.removesuffix(" (10.0 us)") for v in smallm_table.verdicts(fast)] == [small]
    for shape in table["shapes"]:
        shape["cublas_us"] = {"1": 80.0, "16": 80.0}
    behind = smallm_table.verdicts(smallm_table.evaluate(table, _rule_choosing(FAST), TILES.check_config))
    assert sum("cuBLAS" in v for v in behind) == 2, behind


def test_checker_flags_a_choice_the_sweep_did_not_measure() -> None:
    unmeasured = {**smallm_plan.candidates()[FAST], "num_stages": 3}
    rows = smallm_table.evaluate(_synthetic(), lambda n, k, sms, l2: dict(unmeasured), TILES.check_config)
    assert not any(r["chosen_ok"] for r in rows)


def test_fit_never_uses_a_candidate_that_changes_the_bits() -> None:
    rule = smallm_table.fit_rule(_synthetic(), TILES.check_config, TILES.is_small)
    picked = [TILES.choose(s["N"], s["K"], 132, 60 << 20, rule=rule) for s in _synthetic()["shapes"]]
    wrong = TILES.check_config(smallm_plan.candidates()[WRONG])
    assert all(TILES.check_config(p) != wrong for p in picked)
    assert TILES.check_config(picked[0]) == TILES.check_config(smallm_plan.candidates()[FAST])
    # the small shape prefers SLOW (10 us against FAST's 12), so the fit gives small shapes their own config
    assert TILES.check_config(picked[2]) == TILES.check_config(smallm_plan.candidates()[SLOW])
    assert ast.literal_eval(smallm_table.rule_literal(rule)) == rule, "the printed rule does not paste back"


def test_tiles_source_comes_from_patch_0004() -> None:
    source = smallm_table.tiles_module_source()
    assert "def choose(" in source and "RULE" in source
    with pytest.raises(ValueError, match="does not create python/sglang/srt/nowhere.py"):
        smallm_table.new_file_from_patch(smallm_table.PATCH.read_text(), "python/sglang/srt/nowhere.py")


def _table_ids(path: Path | None) -> str:
    return path.name if path else "no-table"


@pytest.mark.evidence  # reads a raw result under docs/evidence
@pytest.mark.parametrize("path", TABLES or [None], ids=_table_ids)
def test_rule_choice_matches_the_measured_table(path: Path | None) -> None:
    if path is None:
        pytest.skip(NO_TABLE)
    rows = smallm_table.evaluate(smallm_table.load_table(path), TILES.choose, TILES.check_config)
    bad = [v for v in smallm_table.verdicts(rows) if "cuBLAS" not in v]
    assert not bad, f"{path.name}: the rule's choice trails the measured table:\n" + "\n".join(bad)


@pytest.mark.evidence  # reads a raw result under docs/evidence
@pytest.mark.parametrize("path", TABLES or [None], ids=_table_ids)
def test_rule_choice_not_slower_than_cublas(path: Path | None) -> None:
    if path is None:
        pytest.skip(NO_TABLE)
    rows = smallm_table.evaluate(smallm_table.load_table(path), TILES.choose, TILES.check_config)
    slow = [v for v in smallm_table.verdicts(rows) if "cuBLAS" in v]
    assert not slow, f"{path.name}: slower than cuBLAS on shapes >= 2 x L2:\n" + "\n".join(slow)


def test_set_rule_writes_the_fitted_rule_into_patch_0004(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    text = smallm_table.PATCH.read_text()
    assert smallm_table.with_rule(text, TILES.RULE, TILES.RULE_SOURCE) == text, (
        "rewriting the shipped rule moves bytes"
    )
    table_path, patch = tmp_path / "smallm-sm90-132sm-60mib.json", tmp_path / "0004.patch"
    table = {**_synthetic(), "date": "2026-12-01T00:00:00Z"}
    table["device"].update(name="NVIDIA H200")
    table_path.write_text(json.dumps(table))
    patch.write_text(text)
    assert smallm_table.main(["set-rule", str(table_path), str(patch)]) == 0
    written = patch.read_text()
    assert smallm_table.hunk_problems(written) == []
    tiles = smallm_table.load_tiles_module(patch)
    assert tiles.RULE == smallm_table.fit_rule(table, TILES.check_config, TILES.is_small)
    assert tiles.RULE_SOURCE.startswith(
        "fitted by checks/gpu/smallm_table.py to smallm-sm90-132sm-60mib.json"
    )
    untouched = [
        s for s in re.split(r"(?=^diff --git )", text, flags=re.M) if smallm_table.TILES_PATH not in s[:200]
    ]
    assert all(section in written for section in untouched), "set-rule changed more than small_m_tiles.py"
    assert "RULE = {" in capsys.readouterr().out


@pytest.mark.parametrize(
    "patch", sorted((REPO_ROOT / "patches" / "sglang").glob("*.patch")), ids=lambda p: p.name
)
def test_patch_hunk_headers_match_their_bodies(patch: Path) -> None:
    assert smallm_table.hunk_problems(patch.read_text()) == []
