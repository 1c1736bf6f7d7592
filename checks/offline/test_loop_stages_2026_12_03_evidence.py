"""The H200 evidence behind patch 0003's KV tile loop at 3 stages (2026-12-03; docs/kernels.md and
the run's results.md read it).

- The prefetch bench (docs/evidence/attn-prefetch-h200-2026-12-03): every variant's decode and verify
  output was bit-equal to SGLang's decode in every case, and kernels.md's table is its figures.
- Plan loop-stages (docs/evidence/perf-h200-2026-12-03-loop-stages, commit 50e7cbe): the attention GPU
  checks all passed with the new loop active; the parity battery's speculating server equalled the no-spec
  reference its run recorded, on every prompt, drafts verified on every prompt; that reference carries the
  card's golden digests, bit for bit.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EVIDENCE = REPO / "docs" / "evidence"
BENCH = EVIDENCE / "attn-prefetch-h200-2026-12-03" / "bench_attn_prefetch.json"
RUN = EVIDENCE / "perf-h200-2026-12-03-loop-stages"
GOLDEN = REPO / "checks" / "golden" / "h200" / "e2e-tiny-hybrid.json"
# kernels.md's columns: the loop at Triton's default and at 3 stages, as the run of 2026-12-03 named them
DEFAULT, STAGES = "shipped", "index-prefetch-3"


def _bench() -> dict:
    return json.loads(BENCH.read_text())


def test_every_prefetch_variant_kept_decodes_bits() -> None:
    rows = _bench()["rows"]
    assert [(r["bs"], r["prefix"]) for r in rows] == [
        (1, 640),
        (1, 2200),
        (1, 32768),
        (1, 131072),
        (8, 2200),
        (8, 32768),
    ]
    for row in rows:
        assert len(row["variants"]) == 6, row["prefix"]
        for name, entry in row["variants"].items():
            assert entry["decode_bits"] is True and entry["verify_bits"] is True, (row["prefix"], name)
            assert entry["decode_us"] > 0 and entry["verify_us"] > 0, (row["prefix"], name)


def test_kernels_page_holds_the_bench_figures() -> None:
    page = (REPO / "docs" / "kernels.md").read_text()
    for row in _bench()["rows"]:
        default, stages = row["variants"][DEFAULT], row["variants"][STAGES]
        figures = [default["decode_us"], stages["decode_us"], default["verify_us"], stages["verify_us"]]
        line = f"| {row['bs']} | {row['prefix']} | " + " | ".join(f"{us:.1f}" for us in figures) + " |"
        assert line in page, line
        assert stages["decode_us"] < default["decode_us"] and stages["verify_us"] < default["verify_us"]


def test_the_gpu_checks_all_passed_with_the_loop_active() -> None:
    log = (RUN / "kernels" / "gpu-checks.log").read_text()
    summary = [line for line in log.splitlines() if re.search(r"\d+ passed", line)]
    assert summary and re.match(r"^113 passed(, \d+ warnings)? in ", summary[-1]), summary
    assert not re.search(r"\b(failed|error|errors|skipped)\b", summary[-1])


def _verdicts() -> dict[str, dict]:
    lines = (RUN / "e2e" / "verdicts.jsonl").read_text().splitlines()
    return {entry["name"]: entry for entry in map(json.loads, lines)}


def _reference_digests() -> dict:
    return json.loads((RUN / "e2e" / "reference-no-spec.digests.json").read_text())


def test_speculation_equalled_the_reference_its_run_recorded() -> None:
    verdicts = _verdicts()
    assert list(verdicts) == ["reference-no-spec", "gpu-parity-recipe"]
    assert all(v["exit"] == 0 and v["tree"] == "patched" for v in verdicts.values())
    (result,) = verdicts["gpu-parity-recipe"]["results"]
    summary = result["summary"]
    assert result["exit"] == 0 and summary["verb"] == "golden check"
    assert summary["prompts"] == summary["equal"] == 24 and summary["differ"] == summary["tokens_differ"] == 0
    assert all(c["equal"] for c in summary["comparisons"]) and len(summary["comparisons"]) == 24
    assert (
        summary["a"]["variant"] == "recipe" and summary["a"]["identity"]["speculative_algorithm"] == "DFLASH"
    )
    assert summary["a"]["spec"]["ran"] == 24
    assert summary["b"]["identity"]["recorded"] == _reference_digests()["metadata"]["recorded"]
    log = (RUN / "e2e" / "server-recipe.log").read_text()
    (args,) = [line for line in log.splitlines() if "server_args={" in line]
    assert "'speculative_algorithm': 'DFLASH'" in args and "'enable_deterministic_inference': True" in args


def test_the_reference_carries_the_cards_golden_digests() -> None:
    new = _reference_digests()
    assert new["card"] == "h200" and new["variant"] == "no-spec"
    assert new["metadata"]["recorded"].startswith("2026-12-03T09:")
    golden = {p["prompt"]["id"]: p["digests"] for p in json.loads(GOLDEN.read_text())["prompts"]}
    assert sorted(p["id"] for p in new["prompts"]) == sorted(golden) and len(golden) == 24
    for prompt in new["prompts"]:
        assert prompt["digests"] == golden[prompt["id"]], prompt["id"]
        assert prompt["positions"] == 64
