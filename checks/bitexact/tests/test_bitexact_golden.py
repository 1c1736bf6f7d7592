"""Golden records: round trip, drift reported in detail, every broken case an exit 2 with a clear message."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bitexact.cli import main
from bitexact.generation import Generation
from bitexact.golden import build_record, load_golden, write_record

ARGS = ["--recipe-name", "tiny-recipe", "--max-new-tokens", "5", "--top-logprobs", "3", "--limit", "3"]


@pytest.fixture
def recorded(models, prompt_file, tmp_path, capsys) -> tuple[str, Path, list[str]]:
    engine = f"hf:{models['target']}"
    common = [
        *ARGS,
        "--prompts",
        str(prompt_file),
        "--golden-dir",
        str(tmp_path / "golden"),
        "--card",
        "test-card",
    ]
    rc = main(
        ["golden", "record", engine, *common, "--out", str(tmp_path / "rec"), "--build-id", "test-build"]
    )
    assert rc == 0
    capsys.readouterr()
    return engine, tmp_path / "golden" / "test-card" / "tiny-recipe.json", common


def test_round_trip_equal(recorded, tmp_path, capsys):
    engine, path, common = recorded
    record = json.loads(path.read_text())
    assert (record["card"], record["recipe"], record["metadata"]["build_id"]) == (
        "test-card",
        "tiny-recipe",
        "test-build",
    )
    assert len(record["prompts"]) == 3 and len(record["prompts"][0]["top_logprobs"][0]) == 3
    rc = main(["golden", "check", engine, *common, "--out", str(tmp_path / "chk"), "--json"])
    summary = json.loads(capsys.readouterr().out)
    assert rc == 0 and summary["equal"] == 3


def test_drift_is_reported_with_position_and_margin(recorded, tmp_path, capsys):
    engine, path, common = recorded
    golden = load_golden(path, card="test-card", recipe="tiny-recipe")
    gens = [Generation.from_json(g.to_json()) for g in golden.generations]
    gens[1].logprobs[2] = gens[1].logprobs[2] + 2.0**-20  # one logprob off in its last bits, digests redone
    rec = golden.record
    write_record(
        build_record(
            card=rec["card"],
            recipe=rec["recipe"],
            variant=rec["variant"],
            settings=rec["settings"],
            metadata=rec["metadata"],
            prompts=golden.prompts,
            generations=gens,
        ),
        path,
    )
    rc = main(["golden", "check", engine, *common, "--out", str(tmp_path / "chk"), "--json"])
    summary = json.loads(capsys.readouterr().out)
    assert rc == 1
    drift = [c for c in summary["comparisons"] if not c["equal"]]
    assert [(c["prompt_id"], c["first_divergence"], c["tokens_equal"]) for c in drift] == [("p1", 2, True)]
    assert drift[0]["margin_a"] is not None
    assert "| p1 | 2 |" in (tmp_path / "chk" / "golden-check.md").read_text()


def test_corrupted_golden_is_a_clear_error(recorded, capsys):
    engine, path, common = recorded
    record = json.loads(path.read_text())
    record["prompts"][0]["logprobs"][0] += 1.0  # values edited without their digests
    path.write_text(json.dumps(record))
    assert main(["golden", "check", engine, *common]) == 2
    assert "corrupted" in capsys.readouterr().err
    path.write_text(path.read_text()[:100])
    assert main(["golden", "check", engine, *common]) == 2
    assert "not JSON" in capsys.readouterr().err


def test_golden_from_another_card_is_refused(recorded, tmp_path, capsys):
    engine, path, common = recorded
    other = tmp_path / "other.json"
    other.write_text(path.read_text())
    rc = main(["golden", "check", engine, *ARGS, "--card", "h200", "--golden", str(other)])
    assert rc == 2
    assert "recorded on card 'test-card', not 'h200'" in capsys.readouterr().err


def test_missing_golden_fails_never_passes(models, tmp_path, capsys):
    rc = main(
        ["golden", "check", f"hf:{models['target']}", *ARGS, "--card", "h200", "--golden-dir", str(tmp_path)]
    )
    assert rc == 2
    err = capsys.readouterr().err
    assert "no golden record for card 'h200'" in err and "nix run .#record-golden" in err
