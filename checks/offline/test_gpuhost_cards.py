"""The card table (gpuhost/cards.json) and identity -> slug: every row, the variants that must stay apart,
unknown and MIG cards, the table's own rules, docs/cards.md against the JSON, and `local_card()` on
the NVML stand-in (one card, cards that share a slug, cards that differ, no driver)."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest
from checkhelpers.driver_standins import (
    H100_NVL,
    H100_PCIE,
    H100_SXM,
    H200,
    MAX_Q,
    RTX_5090,
    SERVER,
    WORKSTATION,
    Card,
    identity,
    install_driver,
    nvml_env,
)
from gpuhost.cards import (
    TABLE,
    CardIdentityError,
    CardTableError,
    bits_verdict,
    derived_slug,
    load_table,
    local_card,
    parse_table,
    row_for,
    slug_for,
)
from gpuhost.driver import OVERRIDE_VAR

REPO = Path(__file__).resolve().parents[2]
RECIPE = json.loads((REPO / "nix/recipes/qwen3.8-27b-exact.json").read_text())


@pytest.mark.parametrize("row", load_table(), ids=lambda r: r.slug)
def test_every_row_names_its_card(row) -> None:
    """A card with the row's device id, name and nominal memory gets the row's slug."""
    card = identity(
        Card(row.name, row.pci_device_id << 16 | 0x10DE, 0, int(row.memory_gib * 1024 * 0.98), "x")
    )
    assert slug_for(card) == row.slug
    far = replace(card, memory_total=int(card.memory_total * 0.8))
    assert slug_for(far) != row.slug  # same device id, other memory: another product


def test_cards_as_nvml_reports_them() -> None:
    assert slug_for(identity(MAX_Q)) == RECIPE["card"]["slug"] == "rtx-pro-6000-blackwell"
    assert slug_for(identity(WORKSTATION)) == "rtx-pro-6000-blackwell-workstation"
    assert slug_for(identity(SERVER)) == "rtx-pro-6000-blackwell-server"
    assert slug_for(identity(H200)) == "h200"
    h100 = {slug_for(identity(c)) for c in (H100_SXM, H100_PCIE, H100_NVL)}
    assert h100 == {"h100-sxm5-80gb", "h100-pcie", "h100-nvl"}


def test_unknown_and_mig_cards_never_take_a_listed_slug() -> None:
    assert slug_for(identity(RTX_5090)) == derived_slug(identity(RTX_5090)) == "geforce-rtx-5090-2b85-32gib"
    listed = {r.slug for r in load_table()}
    assert slug_for(identity(RTX_5090)) not in listed
    mig = identity(replace(H200, mig=True))
    assert slug_for(mig) == "h200-mig" and "h200-mig" not in listed
    other_vendor = replace(identity(H200), pci_vendor_id=0x1002)
    assert row_for(other_vendor) is None


def test_the_recipes_card_is_the_tables() -> None:
    card = RECIPE["card"]
    (row,) = [r for r in load_table() if r.slug == card["slug"]]
    assert (row.name, row.compute_capability, row.memory_gib) == (
        card["name"],
        card["computeCapability"],
        card["memoryGiB"],
    )


def test_refusals_say_whether_the_bits_would_match() -> None:
    target = RECIPE["card"]["slug"]
    assert "will not match: another architecture (compute capability 9.0 against 12.0)" in bits_verdict(
        identity(H200), target
    )
    for sibling in (WORKSTATION, SERVER):
        verdict = bits_verdict(identity(sibling), target)
        assert verdict.startswith("same architecture and SM count") and "unproven" in verdict
    assert "not in the card table" in bits_verdict(identity(RTX_5090), target)
    assert "114 SMs against 132" in bits_verdict(identity(H100_PCIE), "h100-sxm5-80gb")
    assert "MIG" in bits_verdict(identity(replace(MAX_Q, mig=True)), target)


def test_the_table_refuses_merges_without_evidence() -> None:
    row = {
        "slug": "a",
        "pci_device_id": "0x1",
        "name": "A",
        "memory_gib": 1,
        "compute_capability": "9.0",
        "sm_count": None,
    }
    with pytest.raises(
        CardTableError, match="shared by A, B; rows share a slug only with same_bits_evidence"
    ):
        parse_table({"cards": [row, {**row, "pci_device_id": "0x2", "name": "B"}]})
    merged = [
        {**row, "same_bits_evidence": "goldens x and y equal"},
        {**row, "pci_device_id": "0x2", "name": "B", "same_bits_evidence": "goldens x and y equal"},
    ]
    assert [r.slug for r in parse_table({"cards": merged})] == ["a", "a"]
    with pytest.raises(CardTableError, match="listed twice"):
        parse_table({"cards": [row, {**row, "slug": "b"}]})
    with pytest.raises(CardTableError, match="not lower-case words"):
        parse_table({"cards": [{**row, "slug": "A B"}]})
    with pytest.raises(CardTableError, match=r"cards\[0\]: KeyError\('memory_gib'\)"):
        parse_table({"cards": [{k: v for k, v in row.items() if k != "memory_gib"}]})


def test_docs_show_the_table() -> None:
    docs = (REPO / "docs/cards.md").read_text()
    rows = re.findall(
        r"^\| ([a-z0-9-]+) \| (0x[0-9A-F]{4}) \| ([^|]+) \| (\d+) \| ([\d.]+) \| (\w+) \| (\w+) \|$",
        docs,
        re.M,
    )
    shown = [
        (
            s,
            int(d, 16),
            n.strip(),
            int(m),
            c,
            None if sm == "unknown" else int(sm),
            None if l2 == "unknown" else int(l2),
        )
        for s, d, n, m, c, sm, l2 in rows
    ]
    table = [
        (r.slug, r.pci_device_id, r.name, r.memory_gib, r.compute_capability, r.sm_count, r.l2_mib)
        for r in load_table()
    ]
    assert shown == table
    assert json.loads(TABLE.read_text())["cards"]


def test_local_card(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In this process: the NVML stand-in reads its answers from the process environment."""
    monkeypatch.setenv(OVERRIDE_VAR, str(install_driver(tmp_path / "lib")))

    def answer(*cards: Card) -> None:
        for key, value in nvml_env(*cards).items():
            monkeypatch.setenv(key, value)

    answer(MAX_Q)
    card = local_card()
    assert card is not None and slug_for(card) == "rtx-pro-6000-blackwell"
    answer(MAX_Q, MAX_Q)
    assert local_card() == card
    answer(MAX_Q, H200)
    with pytest.raises(CardIdentityError, match=r"different cards .* = h200\); name one with --card SLUG"):
        local_card()
    assert local_card({}, tmp_path / "empty-root") is None
    with pytest.raises(CardIdentityError, match=f"{OVERRIDE_VAR}=/nowhere.*--card SLUG"):
        local_card({OVERRIDE_VAR: "/nowhere"})
