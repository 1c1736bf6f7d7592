"""The H200 evidence of plan closing at commit 505527e, patch 0003's tile loop at 3 stages
(docs/evidence/closing-h200-2026-12-03 and perf-h200-2026-12-03-closing; docs/e2e.md and
docs/performance.md read them).

- gpu-parity-forced-reject passed: the recipe server with every draft rejected equal to the no-spec
  reference its stream recorded, on every prompt, and that reference carries the card's golden digests.
- The golden check of this build against the card's committed goldens (recorded 2026-12-01) passed, short
  and long prompts, with the recipe speculating.
- The pages quote the four servers' rates as their bench JSONL gives them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import test_batteries_2026_12_03_evidence as batteries_evidence

REPO = Path(__file__).resolve().parents[2]
RUN = REPO / "docs" / "evidence" / "closing-h200-2026-12-03"
PERF = REPO / "docs" / "evidence" / "perf-h200-2026-12-03-closing"
PATCHED = RUN / "e2e" / "e2e" / "patched"
GOLDENS = REPO / "checks" / "golden" / "h200"


def _entries(path: Path) -> dict[str, dict]:
    entries = [json.loads(line) for line in path.read_text().splitlines()]
    assert len({e["name"] for e in entries}) == len(entries), f"{path}: a step ran twice"
    return {entry["name"]: entry for entry in entries}


def _prose(path: Path) -> str:
    return " ".join(path.read_text().split())  # line breaks as spaces, for figures split across lines


def test_the_stream_ran_the_forced_reject_battery_and_its_reference_only() -> None:
    assert sorted(_entries(PATCHED / "verdicts.jsonl")) == ["gpu-parity-forced-reject", "reference-no-spec"]
    assert sorted(_entries(RUN / "goldens" / "verdicts.jsonl")) == ["loop-stages"]


def test_every_draft_rejected_still_equals_the_no_spec_reference() -> None:
    entry = _entries(PATCHED / "verdicts.jsonl")["gpu-parity-forced-reject"]
    assert entry["exit"] == 0 and entry["tree"] == "patched" and entry["variant"] == "forced-reject"
    assert "server_restarts" not in entry  # the server started once
    (result,) = entry["results"]
    summary = result["summary"]
    assert result["exit"] == 0 and summary["verb"] == "golden check"
    assert summary["prompts"] == summary["equal"] == 24 and summary["differ"] == summary["tokens_differ"] == 0
    assert all(c["equal"] and c["positions"] == 64 for c in summary["comparisons"])
    a, b = summary["a"], summary["b"]
    assert (
        a["identity"]["speculative_algorithm"] == "DFLASH" and a["identity"]["enable_deterministic_inference"]
    )
    # drafts verified on every prompt and none accepted: one token a step, 63 steps for 64 tokens
    assert a["spec"]["ran"] == 24 and a["spec"]["mean_accept_length"] == pytest.approx(64 / 63)
    reference = json.loads((RUN / "e2e" / "e2e.reference-no-spec.digests.json").read_text())["metadata"]
    assert (b["identity"]["recorded"], b["identity"]["engine"]) == (
        reference["recorded"],
        reference["engine"],
    )
    assert b["identity"]["engine_identity"]["speculative_algorithm"] is None
    meta = json.loads((PATCHED / "meta-forced-reject.json").read_text())
    assert meta["spec_accepted_drafts"] == 0 and meta["spec_verify_ct"] == 63
    summary_txt = _prose(RUN / "e2e" / "summary.txt")
    assert f"{24 * 63} verify steps, drafts accepted 0/{24 * 63 * 7}" in summary_txt
    assert f"{24 * 63} verify steps, 0 of {24 * 63 * 7} drafts accepted" in _prose(RUN / "calls.md")


def test_the_reference_carries_the_cards_golden_digests() -> None:
    new = json.loads((RUN / "e2e" / "e2e.reference-no-spec.digests.json").read_text())
    assert new["card"] == "h200" and new["variant"] == "no-spec"
    assert new["metadata"]["recorded"].startswith("2026-12-03T18:")
    old = batteries_evidence._golden_digests("e2e-tiny-hybrid.json")
    assert sorted(p["id"] for p in new["prompts"]) == sorted(old) and len(old) == 24
    for prompt in new["prompts"]:
        assert prompt["digests"] == old[prompt["id"]], prompt["id"]


@pytest.mark.parametrize(
    ("index", "golden", "count"), [(0, "e2e-tiny-hybrid.json", 24), (1, "e2e-tiny-hybrid-long.json", 3)]
)
def test_this_build_equals_the_cards_committed_goldens(index: int, golden: str, count: int) -> None:
    entry = _entries(RUN / "goldens" / "verdicts.jsonl")["loop-stages"]
    assert entry["exit"] == 0 and entry["tree"] == "patched" and entry["variant"] == "recipe"
    result = entry["results"][index]
    summary = result["summary"]
    assert result["exit"] == 0 and summary["verb"] == "golden check"
    assert summary["prompts"] == summary["equal"] == count and summary["differ"] == 0
    assert summary["a"]["identity"]["speculative_algorithm"] == "DFLASH"
    assert summary["a"]["spec"]["ran"] == count and summary["a"]["spec"]["mean_accept_length"] > 1
    # the golden it was checked against is the committed one, not one recorded in this run
    committed = json.loads((GOLDENS / golden).read_text())["metadata"]
    assert summary["b"]["identity"]["recorded"] == committed["recorded"]
    assert summary["b"]["identity"]["recorded"].startswith("2026-12-01T")


def _rates(server: str) -> dict[int, tuple[str, str]]:
    """t/s and TTFT per prompt length from the bench JSONL: tokens after the first over the time after it."""
    rates: dict[int, tuple[str, str]] = {}
    for folder in ("bench", "bench-long"):
        for jsonl in (PERF / server / folder).glob("bench-*.jsonl"):
            for line in jsonl.read_text().splitlines()[1:]:
                t = json.loads(line)["timing"]
                rates[t["prompt_tokens"]] = (
                    f"{(t['new_tokens'] - 1) / t['decode_s']:.1f}",
                    f"{t['ttft_s']:.2f}",
                )
    return rates


def test_the_pages_quote_this_runs_rates() -> None:
    spec, no_spec, stock = _rates("exact-spec"), _rates("exact-no-spec"), _rates("stock-spec")
    assert sorted(spec) == sorted(no_spec) == sorted(stock) == [640, 2200, 32768, 131072]
    page = _prose(REPO / "docs" / "performance.md")
    lead = page[: page.index("## Results on 2026-12-03")]
    assert f"decodes {spec[131072][0]} t/s at 131072 prompt tokens against {no_spec[131072][0]}" in lead
    assert f"{spec[32768][0]} at 32768" in lead and f"{spec[2200][0]} at 2200" in lead
    readme = _prose(REPO / "README.md")
    quoted = " / ".join(f"{float(spec[n][0]):.0f}" for n in (640, 2200, 32768, 131072))
    assert f"exact with speculation {quoted} t/s" in readme


def test_the_router_attempt_left_no_verdict_and_the_pages_say_so() -> None:
    """The router runs were tried with the last device time and cut while the first replica compiled."""
    attempt = RUN / "router-attempt"
    assert "interrupted (exit 130)" in (attempt / "router.log").read_text()
    assert "fleet: stopping (asked to)" in (attempt / "fleet.log").read_text()
    replica = (attempt / "replica-0.log").read_text()
    assert "Capture target prefill CUDA graph end" in replica and "fired up" not in replica
    assert not list(attempt.rglob("verdict*.json"))
    assert "router not rerun" in (REPO / "README.md").read_text()
    assert "no verdict (`router-attempt/` in that folder)" in _prose(REPO / "docs" / "e2e.md")
