"""The H200 evidence of the capacity batteries with patch 0003's launch plans for the card
(docs/evidence/capacity-h200-2026-12-03, commit 27df319; docs/e2e.md's table reads it).

- The six gpu-capacity-* batteries each ran once over the two runs (the machine was lost after the first
  run's results came back with two of them) and each passed: every answer of the speculating server
  equal to the no-spec reference its own run recorded (the check names that record by the time it was
  recorded, which the committed digests carry), the long prompts too where the battery sends them.
- Each server ran with the setting its battery names, speculating (DFLASH) under deterministic inference,
  as its own log's server_args say, and accepted drafts in its start-up sample.
- Both runs' no-spec references (decode through the launch plans) carry the card's golden digests, the
  short set and the long one (16k, 64k, 128k): the references the batteries compared with are the
  golden's values, bit for bit.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
E2E = REPO / "docs" / "evidence" / "capacity-h200-2026-12-03" / "e2e"
GOLDENS = REPO / "checks" / "golden" / "h200"
RUNS = ("run-1", "run-2")
# battery -> (server variant, server_args key, value as SGLang logs it, long prompts sent)
GRAPH = "cuda_graph_max_bs_decode"
CAPACITY = {
    "gpu-capacity-max-running-1": ("max-running-1", "max_running_requests", "1", False),
    "gpu-capacity-max-seqs-32": ("max-seqs-32", "max_running_requests", "32", False),
    "gpu-capacity-chunked-prefill-4096": ("chunked-prefill-4096", "chunked_prefill_size", "4096", True),
    "gpu-capacity-chunked-prefill-16384": ("chunked-prefill-16384", "chunked_prefill_size", "16384", True),
    "gpu-capacity-cuda-graph-decode-bs-1": ("cuda-graph-decode-bs-1", GRAPH, "1", False),
    "gpu-capacity-cuda-graph-decode-bs-32": ("cuda-graph-decode-bs-32", GRAPH, "32", False),
}


def _verdicts(run: str) -> dict[str, dict]:
    lines = (E2E / run / "patched" / "verdicts.jsonl").read_text().splitlines()
    return {entry["name"]: entry for entry in map(json.loads, lines)}


def _ran() -> dict[str, tuple[str, dict]]:
    ran: dict[str, tuple[str, dict]] = {}
    for run in RUNS:
        for name, entry in _verdicts(run).items():
            if name.startswith("gpu-capacity-"):
                assert name not in ran, f"{name} ran twice"
                ran[name] = (run, entry)
    return ran


def _recorded(run: str, reference: str) -> str:
    return json.loads((E2E / run / f"{reference}.digests.json").read_text())["metadata"]["recorded"]


def test_every_capacity_battery_ran_once_and_passed() -> None:
    ran = _ran()
    assert sorted(ran) == sorted(CAPACITY)
    for name, (run, entry) in ran.items():
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
            comparisons = summary["comparisons"]
            assert len(comparisons) == summary["prompts"] and all(c["equal"] for c in comparisons), name
            # the speculating server of this battery, its drafts verified for every prompt
            assert summary["a"]["variant"] == variant, name
            assert summary["a"]["identity"]["speculative_algorithm"] == "DFLASH", name
            assert summary["a"]["spec"]["ran"] == summary["prompts"], name
            # against the reference this run recorded, whose digests are committed
            assert summary["b"]["identity"]["recorded"] == _recorded(run, reference), (name, reference)


def test_each_run_recorded_its_references_before_its_batteries() -> None:
    for run in RUNS:
        verdicts = _verdicts(run)
        names = list(verdicts)
        assert names[:2] == ["reference-no-spec", "reference-no-spec-long"], run
        assert all(verdicts[n]["exit"] == 0 for n in names[:2]), run


@pytest.mark.parametrize("battery", sorted(CAPACITY))
def test_the_server_ran_the_setting_speculating(battery: str) -> None:
    run, _entry = _ran()[battery]
    variant, key, value, _long = CAPACITY[battery]
    log = (E2E / run / "patched" / f"server-{variant}.log.head-tail").read_text()
    (args,) = [line for line in log.splitlines() if "server_args={" in line]
    assert re.search(rf"'{key}': {value}[,}}]", args), (battery, key)
    assert "'speculative_algorithm': 'DFLASH'" in args and "'enable_deterministic_inference': True" in args
    meta = json.loads((E2E / run / "patched" / f"meta-{variant}.json").read_text())
    assert meta["spec_accept_length"] > 1 and meta["spec_accepted_drafts"] > 0, battery


def _golden_digests(name: str) -> dict[str, dict]:
    record = json.loads((GOLDENS / name).read_text())
    return {p["prompt"]["id"]: p["digests"] for p in record["prompts"]}


@pytest.mark.parametrize("run", RUNS)
@pytest.mark.parametrize(
    ("reference", "golden", "count"),
    [
        ("reference-no-spec", "e2e-tiny-hybrid.json", 24),
        ("reference-no-spec-long", "e2e-tiny-hybrid-long.json", 3),
    ],
)
def test_the_references_carry_the_cards_golden_digests(
    run: str, reference: str, golden: str, count: int
) -> None:
    new = json.loads((E2E / run / f"{reference}.digests.json").read_text())
    assert new["card"] == "h200" and new["variant"] == "no-spec"
    assert new["metadata"]["recorded"].startswith("2026-12-03T")
    old = _golden_digests(golden)
    assert sorted(p["id"] for p in new["prompts"]) == sorted(old) and len(old) == count
    for prompt in new["prompts"]:
        assert prompt["digests"] == old[prompt["id"]], (run, prompt["id"])
        assert prompt["positions"] == 64
