"""The H200 evidence of plan finish (docs/evidence/finish-h200-2026-12-02, commit 09d3b5a): the committed
verdicts of the two radix batteries that had no exit code on the card (docs/e2e.md's table reads them),
and the campaign's phases in the order its calls.md gives.

- gpu-radix-golden: every warm answer equals the card's golden recorded with the cache off (the short
  set and the long one to 131072 tokens), with hits in every warm pass; only the three prompts under one
  64-token cache unit are left out, by name.
- gpu-radix-forced-reject: no draft was accepted, in the server's start-up sample and over the battery's
  own answers (one token a verify step), and every warm answer (plain and shared prefix) equals the cold
  pass, with hits.
"""

from __future__ import annotations

import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FINISH = REPO / "docs" / "evidence" / "finish-h200-2026-12-02"
PATCHED = FINISH / "e2e" / "e2e-radix" / "patched"
SHORT = {"en-short-fact": 16, "en-count": 32, "en-list": 56}


def _verdicts() -> dict[str, dict]:
    lines = (PATCHED / "verdicts.jsonl").read_text().splitlines()
    return {e["name"]: e for e in map(json.loads, lines)}


def _warm_passes_hit(summary: dict) -> None:
    passes = summary["passes"]
    assert passes[0]["name"] == "cold" and passes[0]["hits_max"] == 0
    for warm in passes[1:]:
        assert warm["differ"] == 0 and warm["hits_min"] > 0 and not warm["without_hits"], warm["name"]


def test_both_batteries_passed_with_hits_in_every_warm_pass() -> None:
    verdicts = _verdicts()
    assert sorted(verdicts) == ["gpu-radix-forced-reject", "gpu-radix-golden"]
    for name, entry in verdicts.items():
        assert entry["exit"] == 0 and entry["tree"] == "patched", name
        assert len(entry["results"]) == 2, name
        for result in entry["results"]:
            assert result["exit"] == 0 and result["summary"]["differ"] == 0, name
            _warm_passes_hit(result["summary"])


def test_the_golden_battery_compared_with_the_cache_off_goldens() -> None:
    short, long = _verdicts()["gpu-radix-golden"]["results"]
    assert short["summary"]["equal"] == 42 and long["summary"]["equal"] == 6  # cold and warm, each
    assert {p["prompt_id"]: p["prompt_tokens"] for p in short["summary"]["left_out"]} == SHORT
    assert long["summary"]["left_out"] == []
    for result, golden in ((short, "e2e-tiny-hybrid.json"), (long, "e2e-tiny-hybrid-long.json")):
        for p in result["summary"]["passes"]:
            assert p["compared_with"].endswith(f"/h200/{golden}"), p
    assert long["summary"]["passes"][1]["hits_max"] == 131008  # the 131072-token prompt, to its last unit


def test_the_forced_reject_server_accepted_no_draft() -> None:
    info = json.loads((PATCHED / "meta-radix-forced-reject.json").read_text())  # the server's meta_info
    assert info["spec_accept_rate"] == 0.0 and info["spec_verify_ct"] > 0
    plain, shared = _verdicts()["gpu-radix-forced-reject"]["results"]
    for result in (plain, shared):  # 64 tokens from 63 verify steps: the target's own token each
        assert result["summary"]["spec"]["mean_accept_length"] == 64 / 63
    assert plain["summary"]["mode"] == "plain" and plain["summary"]["equal"] == 21
    assert shared["summary"]["mode"] == "shared-prefix" and shared["summary"]["equal"] == 24


def test_the_phases_ran_in_order_and_every_server_exited_0() -> None:
    log = (FINISH / "logs" / "campaign.log").read_text()
    order = ["phase C", "phase P", "exact-spec exit 0", "exact-no-spec exit 0", "stock-spec exit 0"]
    order += ["stock-no-spec exit 0", "exact-spec-window exit 0", "done"]
    assert [log.index(mark) for mark in order] == sorted(log.index(mark) for mark in order)
