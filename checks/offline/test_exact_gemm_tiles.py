"""Patch 0005's tile rule (exact_gemm_tiles.py, read straight out of the patch) and the lab's table tools
(checks/gpu/exact_gemm_table.py): the rule's choices, its config checks, the fit and the write-back into
the patch, and the shipped rule against every committed H200 sweep table (docs/evidence/exact-gemm-*/)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import exact_gemm_table
import pytest

TILES = exact_gemm_table.load_tiles_module()
TABLES = exact_gemm_table.committed_tables()
MODEL_MS = range(1, 65)


def test_every_choice_is_a_possible_config_and_bucketed_by_m() -> None:
    possible = TILES.possible_configs()
    for sms, l2 in ((132, 60 << 20), (188, 128 << 20), (8, 0)):
        for n, k in ((96, 5120), (5120, 17408), (34816, 5120), (248320, 5120), (1, 7)):
            for m in (*MODEL_MS, 65, 128, 300, 2200, 8192, 100000):
                config = TILES.choose(m, n, k, sms, l2)
                assert config in possible, (m, n, k, config)
                assert config["BLOCK_M"] == TILES.bucket(m, TILES.RULE)["BLOCK_M"]
    assert TILES.RULE["buckets"][-1]["max_m"] is None, "the last bucket must take every larger M"
    maxes = [b["max_m"] for b in TILES.RULE["buckets"][:-1]]
    assert maxes == sorted(maxes) and len(set(maxes)) == len(maxes)


def test_the_width_gives_every_sm_a_tile_where_it_can() -> None:
    entry = {"BLOCK_M": 16, "min_tiles_per_sm": 1.0, "widths": {128: {}, 64: {}, 32: {}}}
    assert TILES.tile_width(8, 34816, 132, entry) == 128  # 272 tiles of 128
    assert TILES.tile_width(8, 5120, 132, entry) == 32  # 40 of 128, 80 of 64: too few; 160 of 32
    assert TILES.tile_width(8, 1024, 132, entry) == 32  # none gives 132 tiles: the narrowest
    assert TILES.tile_width(2200, 5120, 132, {**entry, "BLOCK_M": 128}) == 128  # 18 row blocks x 40


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"BLOCK_M": 16, "BLOCK_N": 48, "BLOCK_K": 64}, "BLOCK_N=48 must be a power of two"),
        ({"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 8}, "BLOCK_K=8 must be a power of two >= 16"),
        ({"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 64, "SPLIT_K": 2}, "unknown keys \\['SPLIT_K'\\]"),
        ({"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 64, "LOAD": "mn"}, "LOAD='mn'"),
        ({"BLOCK_M": 16, "BLOCK_N": 512, "BLOCK_K": 64, "LOAD": "tma"}, "TMA box side is at most 256"),
        ({"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 64, "PROGRAMS_PER_SM": -1}, "PROGRAMS_PER_SM=-1"),
        ({"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 64, "FLATTEN": 1}, "FLATTEN=1 must be a bool"),
        ({"BLOCK_M": True, "BLOCK_N": 16, "BLOCK_K": 64}, "BLOCK_M=True"),
    ],
)
def test_bad_configs_are_named(config: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TILES.check_config(config)


def test_bad_shapes_are_named() -> None:
    with pytest.raises(ValueError, match="need M, N, K and the SM count positive"):
        TILES.choose(0, 5120, 5120, 132, 0)


def _table(candidates: dict[str, dict], shapes: list[dict]) -> dict:
    device = {"name": "test card", "capability": "9.0", "sm_count": 4, "l2_bytes": 0}
    full = {cid: TILES.check_config(c) for cid, c in candidates.items()}
    return {
        "schema": exact_gemm_table.SCHEMA,
        "device": device,
        "candidates": full,
        "shapes": shapes,
        "date": "d",
    }


def _synthetic() -> dict:
    fast16 = {"LOAD": "tma", "BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 128}
    slow16 = {"LOAD": "kn", "BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 256}
    wrong = {"LOAD": "nk", "BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 64}  # fastest, but not bit-equal
    big = {"LOAD": "tma", "BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 8, "PROGRAMS_PER_SM": 1}
    ids = {"fast16": fast16, "slow16": slow16, "wrong": wrong, "big": big}
    shapes = []
    for n in (96, 512):
        us = {}
        for m in (1, 8, 16, 512):
            row = {"cublas": 10.0, "persistent": 30.0, "rule": 11.0}
            if m <= 16:
                row.update(fast16=10.4, slow16=12.0, wrong=9.0)
            else:
                row.update(big=10.2)
            us[str(m)] = row
        bits = {"fast16": "equal", "slow16": "equal", "wrong": "differs: M=3: rows 0 differ", "big": "equal"}
        shapes.append({"N": n, "K": 256, "source": "test", "model": True, "bits": bits, "us": us})
    return _table(ids, shapes)


def test_the_fit_takes_the_fastest_bit_equal_candidate_per_bucket() -> None:
    table = _synthetic()
    rule = exact_gemm_table.fit(table, TILES)
    first, last = rule["buckets"][0], rule["buckets"][-1]
    assert first["max_m"] == 16 and first["BLOCK_M"] == 16
    assert first["widths"] == {
        32: {
            k: v
            for k, v in TILES.check_config(table["candidates"]["fast16"]).items()
            if k not in ("BLOCK_M", "BLOCK_N")
        }
    }
    assert last["max_m"] is None and last["BLOCK_M"] == 128
    choose = lambda *shape: TILES.choose(*shape, rule=rule)  # noqa: E731
    per_m = exact_gemm_table.ratios(table, choose, TILES.check_config, [1, 8, 16, 512])
    assert per_m[8] == [pytest.approx(1.04), pytest.approx(1.04)]
    assert per_m[512] == [pytest.approx(1.02), pytest.approx(1.02)]
    lines = exact_gemm_table.summary(table, choose, TILES.check_config, "fitted")
    assert lines[2].startswith("1 | 1.040 (1.040) | 3.000 | 1.040")  # `wrong` never counts as the best


def test_a_rule_that_picks_an_unequal_config_counts_as_infinitely_slow() -> None:
    table = _synthetic()
    wrong = TILES.check_config(table["candidates"]["wrong"])
    rule = {
        "buckets": [
            {
                "max_m": None,
                "BLOCK_M": 16,
                "small": None,
                "min_tiles_per_sm": 1.0,
                "widths": {32: {k: v for k, v in wrong.items() if k not in ("BLOCK_M", "BLOCK_N")}},
            }
        ]
    }
    choose = lambda *shape: TILES.choose(*shape, rule=rule)  # noqa: E731
    assert exact_gemm_table.rule_time(table, table["shapes"][0], 8, choose, TILES.check_config) == (
        "wrong",
        None,
    )
    assert exact_gemm_table.median_ratio(
        exact_gemm_table.ratios(table, choose, TILES.check_config, [8])[8]
    ) == float("inf")


def test_set_rule_writes_the_fit_into_a_copy_of_patch_0005(tmp_path: Path) -> None:
    table_path = tmp_path / "exact-gemm-sm90-4sm-0mib.json"
    table_path.write_text(json.dumps(_synthetic()))
    patch = tmp_path / "0005.patch"
    shutil.copy(exact_gemm_table.PATCH, patch)
    assert exact_gemm_table.main(["set-rule", str(table_path), str(patch)]) == 0
    written = exact_gemm_table.load_tiles_module(patch)
    assert written.RULE == exact_gemm_table.fit(_synthetic(), TILES)
    assert written.RULE_SOURCE.startswith(
        "fitted by checks/gpu/exact_gemm_table.py to exact-gemm-sm90-4sm-0mib.json"
    )
    # the rest of the patch is untouched, and writing the same rule again moves no byte
    again = exact_gemm_table.with_rule(
        patch.read_text(), written.RULE, written.RULE_SOURCE, tuple(TILES.CONFIG_KEYS)
    )
    assert again == patch.read_text()
    assert exact_gemm_table.main(["set-rule", str(tmp_path / "missing.json"), str(patch)]) == 2


@pytest.mark.evidence  # reads a raw result under docs/evidence
@pytest.mark.parametrize("path", TABLES, ids=lambda p: p.parent.name)
def test_the_shipped_rule_on_each_measured_table(path: Path) -> None:
    """On every committed table: the rule's pick is a bit-equal measured candidate for every model shape
    and timed M, and for M <= 64 (decode and verify batches of the recipe) the median over the model's
    shapes of route / cuBLAS is within 5%."""
    table = exact_gemm_table.load_table(path)
    assert table["complete"], f"{path}: the sweep did not finish"
    per_m = exact_gemm_table.ratios(
        table, TILES.choose, TILES.check_config, sorted({int(m) for s in table["shapes"] for m in s["us"]})
    )
    assert all(v is not None for row in per_m.values() for v in row), per_m
    decode = {m: exact_gemm_table.median_ratio(row) for m, row in per_m.items() if m <= 64}
    assert decode and max(decode.values()) <= 1.05, decode
    assert any(p.name in TILES.RULE_SOURCE for p in TABLES), TILES.RULE_SOURCE
