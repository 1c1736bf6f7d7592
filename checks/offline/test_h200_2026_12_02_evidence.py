"""The H200 evidence of 2026-12-02 (docs/evidence/radix-h200-2026-12-02, recheck-h200-2026-12-02): what
docs/e2e.md, docs/kernels.md and README claim is what the committed results say.

- Plan radix (84770c1): on the patched tree every `bitexact warm` comparison is EQUAL, and the only
  refusals are the three prompts shorter than one 64-token cache unit; the stock tree's cold-warm is
  DIFFERENT; the GPU checks passed; the plans the patch ships for the H200 (_CARD_PLANS) are the ones the
  bench timed fastest at 131072 tokens, every tile plan bit-equal, every draft plan repeatable.
- Plan recheck (5df89f7, the H200's plans active): the attention checks passed; spec equals no-spec; the
  no-spec reference equals the card's golden, the short one value by value, the long one by digests.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from bitexact.golden import digests, load_golden

REPO = Path(__file__).resolve().parents[2]
RADIX = REPO / "docs" / "evidence" / "radix-h200-2026-12-02"
RECHECK = REPO / "docs" / "evidence" / "recheck-h200-2026-12-02"
GOLDENS = REPO / "checks" / "golden" / "h200"
SHORT = {"en-short-fact", "en-count", "en-list"}  # 16, 32 and 56 prompt tokens


def _verdicts(path: Path) -> dict[str, dict]:
    return {e["name"]: e for e in map(json.loads, path.read_text().splitlines())}


def _headline(report: Path) -> str:
    return report.read_text().splitlines()[2]


def test_every_patched_warm_comparison_is_equal_and_only_short_prompts_went_without_hits() -> None:
    reports = sorted((RADIX / "e2e-radix" / "patched").glob("gpu-radix-*/*/warm.md"))
    assert len(reports) == 11, [r.parent.name for r in reports]
    for report in reports:
        assert _headline(report).startswith("**EQUAL: "), report
        for line in report.read_text().splitlines():
            if line.startswith("- refused: pass "):
                listed = set(re.findall(r"([\w-]+) \(0\)", line))
                assert listed == SHORT, (report, line)


def test_the_refusals_were_the_hit_rule_alone() -> None:
    for name, entry in _verdicts(RADIX / "e2e-radix" / "patched" / "verdicts.jsonl").items():
        for result in entry["results"]:
            if result["exit"] != 0:
                log = (RADIX / "e2e-radix" / "patched" / name / "bitexact.log").read_text()
                assert "shows no cache hits for 3/24 prompts" in log, name


def test_the_stock_tree_differs_warm() -> None:
    stock = RADIX / "e2e-radix-stock" / "stock"
    assert _headline(stock / "gpu-radix-cold-warm" / "cold-warm" / "warm.md").startswith("**DIFFERENT: 30/48")
    assert _headline(stock / "gpu-radix-shared-prefix" / "shared-prefix" / "warm.md").startswith(
        "**EQUAL: 24/24"
    )


def test_the_gpu_checks_passed() -> None:
    assert "69 passed" in (RADIX / "kernels" / "gpu-checks.log").read_text()
    log = (RECHECK / "kernels" / "gpu-checks.log").read_text()
    assert "108 passed" in log and "failed" not in log and "error" not in log.lower()


def _bench() -> dict:
    return json.loads((RADIX / "kernels" / "bench_attn_verify.json").read_text())


def test_the_h200_plans_are_the_fastest_measured_at_131072_and_proven() -> None:
    bench = _bench()
    for row in bench["tile_plans"]:
        assert all(p["bits"] == "equal" for p in row["plans"].values()), row
    for row in bench["draft_plans"]:
        assert all(p["repeatable"] for p in row["plans"].values()), row
    longest = [r for r in bench["tile_plans"] if r["prefix"] == 131072]
    (tile,) = longest
    assert min(tile["plans"], key=lambda k: tile["plans"][k]["us"]) == "32-4-4096-4"
    (draft,) = [r for r in bench["draft_plans"] if r["prefix"] == 131072]
    assert min(draft["plans"], key=lambda k: draft["plans"][k]["us"]) == "True-1024-64-8-64"


def test_the_kernels_page_holds_the_benchs_figures() -> None:
    page = (REPO / "docs" / "kernels.md").read_text()
    bench = _bench()
    for key in ("tile_plans", "draft_plans"):
        for row in bench[key]:
            cells = " | ".join(f"{p['us']:.1f}" for p in row["plans"].values())
            assert f"| {row['bs']} | {row['prefix']} | {cells} |" in page, (key, row["bs"], row["prefix"])


def test_with_the_h200_plans_spec_equals_no_spec_and_no_spec_the_golden() -> None:
    verdicts = _verdicts(RECHECK / "e2e" / "patched" / "verdicts.jsonl")
    (result,) = verdicts["gpu-parity-recipe"]["results"]
    assert result["exit"] == 0 and result["summary"]["equal"] == result["summary"]["prompts"] == 24
    new = load_golden(RECHECK / "e2e" / "reference-no-spec.json", card="h200", recipe="e2e-tiny-hybrid")
    old = load_golden(GOLDENS / "e2e-tiny-hybrid.json", card="h200", recipe="e2e-tiny-hybrid")
    was = {gen.prompt_id: gen for gen in old.generations}
    assert sorted(was) == sorted(gen.prompt_id for gen in new.generations) and len(was) == 24
    for gen in new.generations:
        assert gen.token_ids == was[gen.prompt_id].token_ids, gen.prompt_id
        assert gen.logprobs == was[gen.prompt_id].logprobs, gen.prompt_id
        assert digests(gen) == digests(was[gen.prompt_id]), gen.prompt_id
    long_new = json.loads((RECHECK / "e2e" / "reference-no-spec-long.digests.json").read_text())
    long_old = {
        p["prompt"]["id"]: p
        for p in json.loads((GOLDENS / "e2e-tiny-hybrid-long.json").read_text())["prompts"]
    }
    assert sorted(p["id"] for p in long_new["prompts"]) == sorted(long_old) and len(long_old) == 3
    for prompt in long_new["prompts"]:
        assert prompt["digests"] == long_old[prompt["id"]]["digests"], prompt["id"]
