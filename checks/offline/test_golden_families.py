"""Golden families (bitexact/families.py, checks/golden/families.json, docs/cards.md).

- The committed family holds: every member's evidence files exist and their values and per-prompt digests
  equal the family's golden, prompt for prompt (the real records, not a description of them).
- `bitexact golden check` as a process against a server in SGLang's shapes, on cards as the NVML stand-in
  reports them: a member (H100 SXM5) without a golden of its own checks against the family's (recorded on
  an H200) and its report names both cards; a card of another family (H100 PCIe, 114 SMs) is refused; a
  member whose hardware is not the family's is refused naming the property; a pending member is told why.
- Patch 0005's tile rule (exact_gemm_tiles.choose, read out of the patch) chooses the same tile for every
  GEMM of both recipes on the two L2 sizes of the family (50 MiB, H100; 60 MiB, H200): the one property
  the family's members do not share is not one its kernels read differently."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from checkhelpers.canned_sglang import CannedSGLang
from checkhelpers.driver_standins import H100_PCIE, H100_SXM, H200, install_driver, nvml_env

REPO = Path(__file__).resolve().parents[2]
GOLDEN_DIR = REPO / "checks" / "golden"
RECIPE = REPO / "nix" / "recipes" / "e2e-tiny-hybrid.json"


@pytest.mark.evidence  # reads a raw result under docs/evidence
def test_the_committed_families_rest_on_equal_records() -> None:
    from bitexact import families

    loaded = families.load(GOLDEN_DIR)
    assert loaded, "checks/golden/families.json holds no family"
    for family in loaded:
        assert (GOLDEN_DIR / family.golden).is_dir()
        for card, entry in family.members.items():
            if card == family.golden:
                continue
            evidence = entry["same_bits_evidence"]
            for record, golden in zip(evidence["records"], evidence["equal_to"], strict=True):
                mine, theirs = (json.loads((REPO / p).read_text()) for p in (record, golden))
                assert mine["card"] == card and theirs["card"] == family.golden
                assert mine["recipe"] == theirs["recipe"] in family.recipes
                assert mine["settings"] == theirs["settings"]
                keys = ("prompt", "token_ids", "logprobs", "top_logprobs", "digests")
                assert [[p[k] for k in keys] for p in mine["prompts"]] == [
                    [p[k] for k in keys] for p in theirs["prompts"]
                ], f"{record} differs from {golden}"
            assert len(evidence["records"]) == len(family.recipes)


VALUES = ("prompt", "token_ids", "logprobs", "top_logprobs", "digests")


def test_a_pending_members_own_golden_equals_the_familys() -> None:
    """A card pending in a family may keep a golden of its own meanwhile (the H100's 27B shape, recorded with
    a newer build than the family's): where it does, its values equal the family's, prompt for prompt, so the
    pending state is about the build the two were recorded with, not about a difference."""
    from bitexact import families

    owned = 0
    for family in families.load(GOLDEN_DIR):
        for card in family.pending:
            for recipe in family.recipes:
                own = GOLDEN_DIR / card / f"{recipe}.json"
                if not own.exists():
                    continue
                mine = json.loads(own.read_text())
                theirs = json.loads((GOLDEN_DIR / family.golden / f"{recipe}.json").read_text())
                assert mine["card"] == card and mine["recipe"] == theirs["recipe"] == recipe
                assert mine["settings"] == theirs["settings"]
                assert [[p[k] for k in VALUES] for p in mine["prompts"]] == [
                    [p[k] for k in VALUES] for p in theirs["prompts"]
                ], f"{own} differs from the family's golden: a family of its own, not pending"
                owned += 1
    assert owned == 2  # the H100's perf-27b-shape and -long


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return install_driver(tmp_path_factory.mktemp("driver") / "lib")


def bitexact(argv: list[str], card: Any, driver: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BITEXACT_") and k != "LD_LIBRARY_PATH"}
    env |= {"BITEXACT_DRIVER_LIB": str(driver), **nvml_env(card)}
    return subprocess.run(
        [sys.executable, "-m", "bitexact", *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def family_file(golden_dir: Path, **hardware: Any) -> None:
    member = {"same_bits_evidence": {"records": ["r.json"], "equal_to": ["h200/e2e-tiny-hybrid.json"]}}
    data = {
        "schema": 1,
        "families": [
            {
                "recipes": ["e2e-tiny-hybrid"],
                "golden": "h200",
                "hardware": hardware or {"compute_capability": "9.0", "sm_count": 132},
                "members": {"h200": {}, "h100-sxm5-80gb": member},
                "pending": {"h100-nvl": "pending an H200 record of build X"},
            }
        ],
    }
    (golden_dir / "families.json").write_text(json.dumps(data))


@pytest.fixture()
def golden_dir(tmp_path: Path, driver: Path) -> Path:
    """A golden of the tiny recipe recorded on an H200 (as the NVML stand-in reports it)."""
    golden = tmp_path / "golden"
    with CannedSGLang("spec") as server:
        record = [
            "golden",
            "record",
            f"sglang+{server.url}",
            "--recipe",
            str(RECIPE),
            "--golden-dir",
            str(golden),
        ]
        done = bitexact([*record, "--limit", "4", "--out", str(tmp_path / "rec")], H200, driver, tmp_path)
        assert done.returncode == 0, done.stderr[-2000:]
    return golden


def check(golden: Path, card: Any, driver: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    with CannedSGLang("spec") as server:
        argv = [
            "golden",
            "check",
            f"sglang+{server.url}",
            "--recipe",
            str(RECIPE),
            "--golden-dir",
            str(golden),
        ]
        return bitexact([*argv, "--out", str(tmp_path / "check"), "--json"], card, driver, tmp_path)


def test_a_member_checks_against_the_familys_golden_naming_both_cards(
    golden_dir: Path, driver: Path, tmp_path: Path
) -> None:
    family_file(golden_dir)
    done = check(golden_dir, H100_SXM, driver, tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(done.stdout)
    assert (summary["recorded_card"], summary["checked_card"]) == ("h200", "h100-sxm5-80gb")
    assert summary["equal"] == summary["prompts"] == 4
    assert "recorded on card h200, checked on card h100-sxm5-80gb" in summary["title"]
    assert "card h100-sxm5-80gb checks against the golden card h200 recorded" in done.stderr
    line = json.loads((golden_dir / "h200" / "history.jsonl").read_text().splitlines()[-1])
    assert line["verdict"] == "EQUAL" and line["card"] == "h100-sxm5-80gb"


def test_a_card_of_another_family_is_refused(golden_dir: Path, driver: Path, tmp_path: Path) -> None:
    family_file(golden_dir)
    done = check(golden_dir, H100_PCIE, driver, tmp_path)
    assert done.returncode == 2
    assert "card h100-pcie has no golden of e2e-tiny-hybrid and is no member of its family" in done.stderr
    assert (
        "sm_count 132" in done.stderr and "this card: compute_capability '9.0', sm_count 114" in done.stderr
    )


def test_a_member_whose_hardware_is_not_the_familys_is_refused_naming_the_property(
    golden_dir: Path, driver: Path, tmp_path: Path
) -> None:
    family_file(golden_dir, compute_capability="9.0", sm_count=132, l2_mib=60)
    done = check(golden_dir, H100_SXM, driver, tmp_path)
    assert done.returncode == 2
    assert "it has l2_mib 50, not the family's 60: its bits are not the family's" in done.stderr


def test_without_a_family_a_card_needs_its_own_golden(golden_dir: Path, driver: Path, tmp_path: Path) -> None:
    done = check(golden_dir, H100_SXM, driver, tmp_path)
    assert done.returncode == 2 and "record-golden" in done.stderr


def test_families_file_errors_name_the_file_and_the_field(tmp_path: Path) -> None:
    from bitexact import families
    from bitexact.errors import GoldenError

    (tmp_path / "families.json").write_text('{"schema": 1, "families": [{"recipes": ["r"], "golden": "a", '
                                           '"hardware": {"sm": 1}, "members": {}}]}')  # fmt: skip
    with pytest.raises(GoldenError, match=r"families\[0\]\.hardware names \['sm'\]"):
        families.load(tmp_path)
    (tmp_path / "families.json").write_text(
        '{"schema": 1, "families": [{"recipes": ["r"], "golden": "a", "hardware": {}, "members": {"b": {}}}]}'
    )
    with pytest.raises(GoldenError, match="member b carries no same_bits_evidence"):
        families.load(tmp_path)
    (tmp_path / "families.json").write_text('{"schema": 2}')
    with pytest.raises(GoldenError, match="has schema 2: it was written by a newer bitexact"):
        families.load(tmp_path)


def test_a_pending_member_is_told_why(tmp_path: Path) -> None:
    from bitexact import families
    from bitexact.errors import GoldenError

    family_file(tmp_path)
    with pytest.raises(
        GoldenError, match="is pending an H200 record of build X; record this card's own golden"
    ):
        families.resolve(tmp_path, "h100-nvl", "e2e-tiny-hybrid", {})


# Every GEMM of each recipe's target, (N, K) of `x @ W^T` with W [N, K]: lab/card/tiny_model.py's
# constants (hidden 1024, attention 6/1 heads of 256 with the output gate, GDN 4/12 heads of 128, MLP 3072,
# 3014 tokens) and the 27B shape's (hidden 5120, attention 24/4 heads of 256 with the gate, GDN 16/48 heads
# of 128, MLP 17408, 248320 tokens; lab/perf/model_27b.py).
GEMMS = {
    "e2e-tiny-hybrid": [
        (6 * 256 * 2 + 2 * 256, 1024),  # attention qkv with the output gate
        (1024, 6 * 256),  # attention o_proj
        (4 * 128 * 2 + 12 * 128 * 2, 1024),  # GDN in_proj_qkvz
        (12 * 2, 1024),  # GDN in_proj_ba
        (1024, 12 * 128),  # GDN out_proj
        (2 * 3072, 1024),  # MLP gate_up
        (1024, 3072),  # MLP down
        (3014, 1024),  # LM head
    ],
    "perf-27b-shape": [
        (24 * 256 * 2 + 2 * 4 * 256, 5120),
        (5120, 24 * 256),
        (16 * 128 * 2 + 48 * 128 * 2, 5120),
        (48 * 2, 5120),
        (5120, 48 * 128),
        (2 * 17408, 5120),
        (5120, 17408),
        (248320, 5120),
    ],
}
# decode and verify rows (up to 8 requests x 9 positions and beyond), and prefill chunks up to the recipe's
MS = [*range(1, 129), 192, 256, 320, 512, 640, 1000, 1024, 2048, 2200, 4096, 8192]


@pytest.mark.parametrize("recipe", sorted(GEMMS))
def test_the_tile_rule_chooses_alike_on_both_l2_sizes_of_the_family(recipe: str) -> None:
    import exact_gemm_table

    tiles = exact_gemm_table.load_tiles_module()
    h100, h200 = (50 << 20, 132), (60 << 20, 132)
    differ = [
        (m, n, k)
        for n, k in GEMMS[recipe]
        for m in MS
        if tiles.choose(m, n, k, h100[1], h100[0]) != tiles.choose(m, n, k, h200[1], h200[0])
    ]
    assert differ == []
