"""The H200 evidence of the batteries with patch 0003's tile loop at 3 stages
(docs/evidence/batteries-h200-2026-12-03, plan `batteries` at commit 4458d63; docs/e2e.md reads it).

- The six gpu-capacity-* batteries each ran once over three streams and each passed: every answer of the
  speculating server equal to the no-spec reference its own stream recorded, the long prompts too where
  the battery sends them; each server ran its setting, speculating under deterministic inference.
- The patched tree's radix batteries passed, forced-reject included (a server that accepted no draft),
  each warm answer equal to the cold one (or to the card's golden) with every warm one served from the
  cache; the stock tree's cold-warm differs.
- Every no-spec reference the streams recorded carries the card's golden digests.
- The parity stream's recipe server failed in SGLang's pool sizing, so gpu-parity-recipe, -inflight-8,
  -long and gpu-repeat have no verdict from this run (exit 2, the error kept), which is what the pages
  say.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import test_capacity_2026_12_03_evidence as capacity_evidence

REPO = Path(__file__).resolve().parents[2]
E2E = REPO / "docs" / "evidence" / "batteries-h200-2026-12-03" / "e2e"
GOLDENS = REPO / "checks" / "golden" / "h200"
# the streams' result folders, as the campaign of that day named them
PATCHED = ("e2e", "e2e-radix", "e2e-radix-reject", "e2e-capacity")
# battery -> (server variant, server_args key, value, long prompts sent): the capacity run's own table
CAPACITY = capacity_evidence.CAPACITY
# every radix battery of the plan (checks/plans/e2e-tiny-hybrid.json)
PLAN = json.loads((REPO / "checks" / "plans" / "e2e-tiny-hybrid.json").read_text())
RADIX = tuple(b["name"] for b in PLAN["batteries"] if b["name"].startswith("gpu-radix-"))


def _verdicts(stream: str, tree: str = "patched") -> dict[str, dict]:
    lines = (E2E / stream / tree / "verdicts.jsonl").read_text().splitlines()
    return {entry["name"]: entry for entry in map(json.loads, lines)}


def _ran(prefix: str) -> dict[str, tuple[str, dict]]:
    ran: dict[str, tuple[str, dict]] = {}
    for stream in PATCHED:
        for name, entry in _verdicts(stream).items():
            if name.startswith(prefix):
                assert name not in ran, f"{name} ran twice"
                ran[name] = (stream, entry)
    return ran


def _recorded(stream: str, reference: str) -> tuple[str, str]:
    """When and from which server (each stream had its own port) the reference was recorded."""
    metadata = json.loads((E2E / f"{stream}.{reference}.digests.json").read_text())["metadata"]
    return metadata["recorded"], metadata["engine"]


def test_every_capacity_battery_ran_once_and_passed() -> None:
    ran = _ran("gpu-capacity-")
    assert sorted(ran) == sorted(CAPACITY)
    for name, (stream, entry) in ran.items():
        variant, _key, _value, long = CAPACITY[name]
        assert entry["exit"] == 0 and entry["tree"] == "patched", name
        references = ["reference-no-spec", "reference-no-spec-long"] if long else ["reference-no-spec"]
        assert len(entry["results"]) == len(references), name
        for result, reference in zip(entry["results"], references, strict=True):
            summary = result["summary"]
            assert result["exit"] == 0 and summary["verb"] == "golden check", name
            assert summary["prompts"] == (3 if reference.endswith("long") else 24), name
            assert summary["equal"] == summary["prompts"] and summary["differ"] == 0, name
            assert summary["tokens_differ"] == 0, name
            assert all(c["equal"] for c in summary["comparisons"]), name
            assert summary["a"]["variant"] == variant, name
            assert summary["a"]["identity"]["speculative_algorithm"] == "DFLASH", name
            assert summary["a"]["spec"]["ran"] == summary["prompts"], name
            # against the reference its own stream recorded, whose digests are committed
            b = summary["b"]["identity"]
            assert (b["recorded"], b["engine"]) == _recorded(stream, reference), (name, reference)


@pytest.mark.parametrize("battery", sorted(CAPACITY))
def test_the_capacity_server_ran_the_setting_speculating(battery: str) -> None:
    stream, _entry = _ran("gpu-capacity-")[battery]
    variant, key, value, _long = CAPACITY[battery]
    log = (E2E / stream / "patched" / f"server-{variant}.log.head-tail").read_text()
    (args,) = [line for line in log.splitlines() if "server_args={" in line]
    assert re.search(rf"'{key}': {value}[,}}]", args), (battery, key)
    assert "'speculative_algorithm': 'DFLASH'" in args and "'enable_deterministic_inference': True" in args
    meta = json.loads((E2E / stream / "patched" / f"meta-{variant}.json").read_text())
    assert meta["spec_accept_length"] > 1 and meta["spec_accepted_drafts"] > 0, battery


def _warm_results(entry: dict) -> list[dict]:
    summaries = [r["summary"] for r in entry["results"]]
    assert summaries and all(s["verb"] == "warm" for s in summaries), entry["name"]
    return summaries


def test_the_patched_radix_batteries_passed_from_the_cache() -> None:
    ran = _ran("gpu-radix-")
    assert sorted(ran) == sorted(RADIX) and "gpu-radix-forced-reject" in RADIX
    for name, (_stream, entry) in ran.items():
        assert entry["exit"] == 0, name
        for summary in _warm_results(entry):
            assert summary["compared"] > 0 and summary["equal"] == summary["compared"], name
            assert summary["differ"] == 0 and summary["warm_hits_min"] >= 64, name
    hits = {name: [s["warm_hits_min"] for s in _warm_results(entry)] for name, (_s, entry) in ran.items()}
    assert hits == {  # the fewest cached tokens of any warm answer, each check: what the pages quote
        "gpu-radix-cold-warm": [64],
        "gpu-radix-shared-prefix": [1216],
        "gpu-radix-long-extend": [65536, 65536],
        "gpu-radix-inflight-8": [1216, 64],
        "gpu-radix-repeat": [64],
        "gpu-radix-golden": [64, 16320],
        "gpu-radix-forced-reject": [64, 1216],
    }
    repeat = _warm_results(ran["gpu-radix-repeat"][1])
    assert [s["compared"] for s in repeat] == [1029]
    golden = _warm_results(ran["gpu-radix-golden"][1])
    assert [s["reference"].rsplit("/", 1)[1] for s in golden] == [
        "e2e-tiny-hybrid.json",
        "e2e-tiny-hybrid-long.json",
    ]


def test_forced_reject_accepted_no_draft() -> None:
    meta = json.loads((E2E / "e2e-radix-reject" / "patched" / "meta-radix-forced-reject.json").read_text())
    assert meta["spec_accepted_drafts"] == 0 and meta["spec_proposed_drafts"] > 0


def test_the_stock_trees_cold_warm_differs() -> None:
    stock = _verdicts("e2e-radix-stock", "stock")
    assert stock["gpu-radix-cold-warm"]["exit"] == 1
    (summary,) = _warm_results(stock["gpu-radix-cold-warm"])
    assert (summary["equal"], summary["compared"]) == (24, 42)


def test_the_parity_batteries_have_no_verdict_the_recipe_server_failed_in_pool_sizing() -> None:
    parity = _verdicts("e2e")
    names = ("gpu-parity-recipe", "gpu-parity-inflight-8", "gpu-parity-long", "gpu-repeat")
    assert all(parity[n]["exit"] == 2 and "results" not in parity[n] for n in names)
    assert "Loaded weights leave no GPU memory for the KV cache" in parity["gpu-parity-recipe"]["error"]


def _golden_digests(name: str) -> dict[str, dict]:
    record = json.loads((GOLDENS / name).read_text())
    return {p["prompt"]["id"]: p["digests"] for p in record["prompts"]}


@pytest.mark.parametrize(
    ("stream", "reference", "golden", "count"),
    [
        ("e2e", "reference-no-spec", "e2e-tiny-hybrid.json", 24),
        ("e2e", "reference-no-spec-long", "e2e-tiny-hybrid-long.json", 3),
        ("e2e-radix-reject", "reference-no-spec", "e2e-tiny-hybrid.json", 24),
        ("e2e-radix-reject", "reference-no-spec-long", "e2e-tiny-hybrid-long.json", 3),
        ("e2e-capacity", "reference-no-spec", "e2e-tiny-hybrid.json", 24),
    ],
)
def test_the_references_carry_the_cards_golden_digests(
    stream: str, reference: str, golden: str, count: int
) -> None:
    new = json.loads((E2E / f"{stream}.{reference}.digests.json").read_text())
    assert new["card"] == "h200" and new["variant"] == "no-spec"
    assert new["metadata"]["recorded"].startswith("2026-12-03T")
    old = _golden_digests(golden)
    assert sorted(p["id"] for p in new["prompts"]) == sorted(old) and len(old) == count
    for prompt in new["prompts"]:
        assert prompt["digests"] == old[prompt["id"]], (stream, prompt["id"])
