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
        [
            "golden",
            "record",
            engine,
            *common,
            "--new-card",
            "--out",
            str(tmp_path / "rec"),
            "--build-id",
            "test-build",
        ]
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
    assert "is corrupted (not standard JSON" in capsys.readouterr().err


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


def test_record_refuses_to_overwrite_without_force(recorded, tmp_path, capsys):
    engine, path, common = recorded
    before = path.read_text()
    rc = main(["golden", "record", engine, *common, "--new-card", "--out", str(tmp_path / "again")])
    assert rc == 2
    assert f"golden {path.absolute()} exists; pass --force to replace it" in capsys.readouterr().err
    assert path.read_text() == before
    rc = main(
        ["golden", "record", engine, *common, "--new-card", "--out", str(tmp_path / "again"), "--force"]
    )
    assert rc == 0
    assert capsys.readouterr().out.startswith(
        f"golden record: wrote {path.absolute()} (3 prompts, card test-card"
    )


def _without(argv: list[str], *options: str) -> list[str]:
    """argv with each of `options` and its value left out."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg in options:
            skip = True
        else:
            out.append(arg)
    return out


def test_check_refuses_settings_the_golden_was_not_recorded_with(recorded, tmp_path, capsys):
    engine, path, common = recorded
    base = ["golden", "check", engine, *_without(common, "--max-new-tokens", "--top-logprobs")]
    rc = main([*base, "--out", str(tmp_path / "c"), "--max-new-tokens", "9"])
    assert rc == 2
    err = capsys.readouterr().err
    assert "--max-new-tokens 9" in err and "recorded with --max-new-tokens 5" in err
    rc = main([*base, "--out", str(tmp_path / "c"), "--top-logprobs", "2"])
    assert rc == 2 and "recorded with --top-logprobs 3" in capsys.readouterr().err
    # the golden's own values are accepted, and --limit takes its first prompts
    argv = [*_without(base, "--limit", "--prompts"), "--limit", "2", "--max-new-tokens", "5"]
    rc = main([*argv, "--out", str(tmp_path / "c2"), "--json"])
    summary = json.loads(capsys.readouterr().out)
    assert rc == 0 and summary["prompts"] == 2 and summary["settings"]["max_new_tokens"] == 5


def test_check_refuses_prompts_the_golden_does_not_hold(recorded, tmp_path, capsys):
    engine, _, common = recorded
    rc = main(["golden", "check", engine, *_without(common, "--limit"), "--out", str(tmp_path / "c")])
    assert rc == 2  # the prompt file holds 6 prompts, the golden the first 3
    assert "prompt 'p3' is not in golden" in capsys.readouterr().err


def test_no_card_is_guessed_for_a_server_this_machine_cannot_see(tmp_path, capsys, monkeypatch):
    """A client without a GPU against a server on 127.0.0.1 (behind an ssh tunnel, say), and a client
    with a GPU against a server elsewhere: neither may key the golden by this machine's card. Both are
    refused before any server is contacted (nothing listens on these addresses)."""
    import bitexact.goldenselect as golden_select

    common = ["--recipe-name", "r", "--golden-dir", str(tmp_path / "g"), "--out", str(tmp_path / "o")]
    monkeypatch.setattr(golden_select, "detect_card", lambda: "cpu")
    for verb in ("record", "check"):
        assert main(["golden", verb, "sglang+http://127.0.0.1:9", *common]) == 2
        assert "no NVIDIA GPU is visible on this machine" in capsys.readouterr().err
    monkeypatch.setattr(golden_select, "detect_card", lambda: "h200")
    assert main(["golden", "record", "sglang+http://10.11.12.13:30000", *common]) == 2
    err = capsys.readouterr().err
    assert "runs on another machine" in err and "pass --card SLUG" in err
    assert not (tmp_path / "g").exists()
    with pytest.raises(SystemExit) as refused:  # a usage error of the option itself (argparse's exit 2)
        main(["golden", "record", "hf:/m", *common, "--card", "../up"])
    assert refused.value.code == 2
    assert "a name that becomes a file or folder name is lowercase" in capsys.readouterr().err


def test_the_golden_dir_comes_from_the_repository_not_the_current_directory(
    models, prompt_file, tmp_path, capsys, monkeypatch
):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    engine = f"hf:{models['target']}"
    argv = [
        *ARGS,
        "--prompts",
        str(prompt_file),
        "--card",
        "test-card",
        "--new-card",
        "--out",
        str(tmp_path / "o"),
    ]
    assert main(["golden", "record", engine, *argv]) == 2
    assert "where do goldens live?" in capsys.readouterr().err
    assert not (elsewhere / "checks").exists()
    repo = tmp_path / "repo"
    (repo / "nix" / "recipes").mkdir(parents=True)
    (repo / "checks").mkdir()
    recipe = repo / "nix" / "recipes" / "tiny.json"
    committed = Path(__file__).resolve().parents[3] / "nix" / "recipes" / "qwen3.8-27b-exact.json"
    tiny = {**json.loads(committed.read_text()), "name": "tiny-recipe", "variants": {"recipe": {}}}
    recipe.write_text(json.dumps(tiny))  # a whole recipe whose `recipe` variant says nothing of speculation
    rest = [a for a in argv if a not in ("--recipe-name", "tiny-recipe")]
    assert main(["golden", "record", engine, "--recipe", str(recipe), *rest]) == 0
    wrote = repo / "checks" / "golden" / "test-card" / "tiny-recipe.json"
    assert capsys.readouterr().out.startswith(f"golden record: wrote {wrote} ")
    assert wrote.is_file() and not (elsewhere / "checks").exists()
