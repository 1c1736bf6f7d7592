"""`bitexact warm` and prompts too short for the cache's match unit. On an H200 (2026-12-02) SGLang 0.5.20's
cache for a hybrid GDN model hit in 64-token units only, so prompts of 16, 32 and 56 tokens never hit and
every plain warm battery was refused. The stand-in server's `radix-hybrid-64` matches as measured; the
refusal says why, and --min-prompt-tokens leaves such prompts out of every comparison, saying so."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from bitexact.cli import main
from checkhelpers.bx_cli import SETTINGS
from checkhelpers.bx_tiny_models import write_prompts
from checkhelpers.canned_sglang import CannedSGLang

# Prompt lengths from the H200 run (16, 32, 56 never hit; 95 -> 64, 170 -> 128, 67 -> 64), the short ones
# between the long ones, so that leaving them out cannot line up by position alone.
LENGTHS = [95, 16, 170, 32, 67, 56]
SHORT = {"p1": 16, "p3": 32, "p5": 56}
KEPT = ["p0", "p2", "p4"]


def _run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, dict[str, Any], str]:
    rc = main([*argv, "--json"])
    captured = capsys.readouterr()
    return rc, (json.loads(captured.out) if captured.out.strip() else {}), captured.err


@pytest.fixture
def prompts(tmp_path: Path) -> Path:
    return write_prompts(tmp_path / "measured.jsonl", LENGTHS)


def _warm(url: str, prompts: Path, out: Path, *extra: str) -> list[str]:
    return ["warm", f"sglang+{url}", "--prompts", str(prompts), "--out", str(out), *SETTINGS, *extra]


def test_short_prompts_without_hits_are_refused_with_the_reason(prompts, tmp_path, capsys) -> None:
    with CannedSGLang("radix-hybrid-64") as server:
        rc, summary, err = _run(capsys, _warm(server.url, prompts, tmp_path))
    assert rc == 2 and summary == {}
    assert (
        "pass warm1 shows no cache hits for 3/6 prompts (cached tokens reported: p1 (0), p3 (0), p5 (0))"
        in err
    )
    hint = (
        "these are the shortest prompts (16 to 56 prompt tokens; the smallest hit in this pass was 64 "
        "tokens): a prompt no longer than the cache's match unit cannot be served from it (SGLang's hybrid "
        "GDN cache matched in 64-token units on an H200, 2026-12-02); leave such prompts out with "
        "--min-prompt-tokens 65"
    )
    assert hint in err and hint in (tmp_path / "warm.md").read_text()


def test_no_hint_where_the_pass_has_no_hit(tmp_path, capsys) -> None:
    """A pass without any hit has no smallest hit to hold the prompts to: no hint."""
    with CannedSGLang("radix-never-hits") as server:
        rc, _, err = _run(capsys, _warm(server.url, write_prompts(tmp_path / "p.jsonl", [200]), tmp_path))
    assert rc == 2 and "no cache hits for 1/1 prompts" in err and "shortest prompts" not in err


def test_left_out_prompts_are_sent_named_and_not_compared(prompts, tmp_path, capsys) -> None:
    with CannedSGLang("radix-hybrid-64") as server:
        argv = _warm(server.url, prompts, tmp_path, "--min-prompt-tokens", "65", "--warm-passes", "2")
        rc, summary, err = _run(capsys, argv)
        sent = {len(r["body"]["input_ids"]) for r in server.requests}
    assert rc == 0, err
    assert sent == set(LENGTHS)  # every prompt was sent, the short ones too
    assert summary["min_prompt_tokens"] == 65
    assert summary["left_out"] == [{"prompt_id": i, "prompt_tokens": n} for i, n in SHORT.items()]
    assert (summary["prompts"], summary["prompts_sent"]) == (3, 6)
    assert (summary["equal"], summary["compared"], summary["differ"]) == (6, 6, 0)
    assert [row["prompt_id"] for row in summary["hits"]] == KEPT
    for row in summary["hits"]:  # as measured: floor((L-1)/64)*64
        assert row["warm1"] == row["warm2"] == (row["prompt_tokens"] - 1) // 64 * 64 > 0
    for row in summary["passes"]:
        assert row["without_hits"] == []
        if "comparisons" in row:  # the warm passes (the cold one is the reference)
            assert [c["prompt_id"].split("#")[0] for c in row["comparisons"]] == KEPT
    assert summary["warm_hits_min"] == 64
    report = (tmp_path / "warm.md").read_text()
    assert "**EQUAL: 6/6 answers" in report and "- prompts: 3 compared of 6 sent" in report
    assert (
        "- left out: 3 prompts shorter than --min-prompt-tokens 65 (their token ids, else the server's "
        "count in the cold pass; sent, not compared, not held to the hit checks): p1 (16 tokens), "
        "p3 (32 tokens), p5 (56 tokens)"
    ) in report
    # the verdict line (without --json) names them too
    with CannedSGLang("radix-hybrid-64") as server:
        assert main(_warm(server.url, prompts, tmp_path / "line", "--min-prompt-tokens", "65")) == 0
    line = capsys.readouterr().out
    assert line.startswith("warm: EQUAL: 3/3 answers equal to the cold pass")
    assert (
        "; 3 of 6 prompts left out, shorter than --min-prompt-tokens 65: p1 (16), p3 (32), p5 (56);" in line
    )


def test_an_option_that_leaves_none_out_says_so(prompts, tmp_path, capsys) -> None:
    with CannedSGLang("radix") as server:
        rc, summary, err = _run(capsys, _warm(server.url, prompts, tmp_path, "--min-prompt-tokens", "16"))
    assert rc == 0, err
    assert summary["left_out"] == [] and summary["prompts"] == summary["prompts_sent"] == 6
    assert (
        "- left out: none (every prompt has --min-prompt-tokens 16 or more"
        in (tmp_path / "warm.md").read_text()
    )


def test_kept_prompts_that_differ_are_still_different(prompts, tmp_path, capsys) -> None:
    with CannedSGLang("radix-hybrid-64", warm_drift=True) as server:
        rc, summary, _ = _run(capsys, _warm(server.url, prompts, tmp_path, "--min-prompt-tokens", "65"))
    assert rc == 1 and (summary["differ"], summary["equal"], summary["compared"]) == (3, 0, 3)
    assert [p["prompt_id"] for p in summary["left_out"]] == list(SHORT)
    assert "**DIFFERENT: 0/3 answers" in (tmp_path / "warm.md").read_text()


def test_a_golden_is_compared_on_the_kept_prompts_alone(prompts, tmp_path, capsys) -> None:
    """The golden holds all six prompts; its answers are taken by the kept prompts' ids, in order: a
    misalignment would compare one prompt's answer with another's (the canned answers depend on the ids)."""
    golden = tmp_path / "golden.json"
    key = ["--card", "h200", "--recipe-name", "tiny"]
    with CannedSGLang("normal") as server:
        record = ["golden", "record", f"sglang+{server.url}", *key, "--golden", str(golden)]
        rc, _, err = _run(
            capsys, [*record, "--prompts", str(prompts), *SETTINGS, "--out", str(tmp_path / "r")]
        )
        assert rc == 0, err
    check = ["--golden", str(golden), *key, "--min-prompt-tokens", "65"]
    for drift, rc_want, equal in ((False, 0, 6), (True, 1, 3)):
        out = tmp_path / f"drift-{drift}"
        with CannedSGLang("radix-hybrid-64", warm_drift=drift) as server:
            rc, summary, err = _run(capsys, ["warm", f"sglang+{server.url}", *check, "--out", str(out)])
        assert rc == rc_want, err
        assert summary["reference"] == f"golden {golden}" and summary["compared"] == 6
        assert summary["equal"] == equal and [p["prompt_id"] for p in summary["left_out"]] == list(SHORT)
        passes = {p["name"]: p for p in summary["passes"]}
        assert passes["cold"]["equal"] == 3 and passes["warm1"]["equal"] == equal - 3
        assert [c["prompt_id"].split("#")[0] for c in passes["cold"]["comparisons"]] == KEPT


def test_in_shared_prefix_mode_the_counts_include_the_prefix(prompt_file, tmp_path, capsys) -> None:
    """conftest's prompts (5, 23, 11, 40, 17, 31 tokens) after a 37-token prefix: 42 to 77 tokens."""
    with CannedSGLang("radix") as server:
        argv = _warm(server.url, prompt_file, tmp_path, "--shared-prefix", "37", "--vocab-size", "90")
        rc, summary, err = _run(capsys, [*argv, "--min-prompt-tokens", "50"])
    assert rc == 0, err
    assert summary["left_out"] == [
        {"prompt_id": "p0", "prompt_tokens": 42},
        {"prompt_id": "p2", "prompt_tokens": 48},
    ]
    assert [row["prompt_id"] for row in summary["hits"]] == ["p1", "p3", "p4", "p5"]
    assert summary["compared"] == 4


def test_an_option_that_leaves_no_prompt_is_refused(prompts, tmp_path, capsys) -> None:
    with CannedSGLang("radix-hybrid-64") as server:
        rc, _, err = _run(capsys, _warm(server.url, prompts, tmp_path, "--min-prompt-tokens", "171"))
    assert rc == 2
    assert (
        "--min-prompt-tokens 171 leaves no prompt to compare: the longest of the 6 has 170 prompt tokens"
        in err
    )


class CountlessSGLang(CannedSGLang):
    """A server that sends no meta_info.prompt_tokens (a proxy that trims it, an older release)."""

    def generate(self, body: dict[str, Any]) -> dict[str, Any]:
        answer = super().generate(body)
        del answer["meta_info"]["prompt_tokens"]
        return answer


def test_a_server_without_prompt_counts_is_refused(tmp_path, capsys) -> None:
    """Text prompts (the server tokenizes them): only its count says how long they are."""
    texts = tmp_path / "texts.jsonl"
    texts.write_text(
        "".join(json.dumps({"id": f"t{i}", "text": "x" * (40 * i + 20)}) + "\n" for i in range(3))
    )
    with CountlessSGLang("radix") as server:
        assert _run(capsys, _warm(server.url, texts, tmp_path / "plain"))[0] == 0  # fine without the option
        rc, _, err = _run(capsys, _warm(server.url, texts, tmp_path / "min", "--min-prompt-tokens", "65"))
    assert rc == 2
    assert (
        "--min-prompt-tokens 65: the server reported no prompt token count for 3/3 prompts in the cold pass "
        "(e.g. t0, t1, t2;"
    ) in err


@pytest.mark.parametrize(
    ("value", "message"),
    [("0", "must be 1 or more, not 0"), ("1e20", "'1e20' is not a whole number"), ("2000000", "or less")],
)
def test_the_option_is_a_bounded_count(value, message, tmp_path, capsys) -> None:
    with pytest.raises(SystemExit) as stop:
        main(
            ["warm", "sglang+http://127.0.0.1:9", "--min-prompt-tokens", value, "--out", str(tmp_path / "o")]
        )
    assert stop.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
