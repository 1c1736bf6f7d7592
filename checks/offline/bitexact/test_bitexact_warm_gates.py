"""`bitexact warm` under the rules every verb follows: its options spelled out, each given once
and bounded; names that become paths checked; its verdict naming what it compared; the answer gate on
every stored and compared answer; one command per verb in an --out, with --force; a count of cached
tokens read strictly. Against real local servers in SGLang's shapes (canned_sglang.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bitexact.cli import main
from bitexact.errors import EngineError
from bitexact.generation import Generation
from bitexact.prefixcache import cached_tokens
from checkhelpers.bx_cli import SETTINGS
from checkhelpers.canned_sglang import CannedSGLang

PROMPTS = 6  # conftest's prompt_file
NEW, TOP = 6, 4  # bx_cli.SETTINGS


def _warm(url: str, prompt_file: Path, out: Path, *extra: str) -> list[str]:
    return ["warm", f"sglang+{url}", "--prompts", str(prompt_file), "--out", str(out), *SETTINGS, *extra]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--warm-pass", "2"], "unrecognized arguments: --warm-pass 2"),
        (["--inflight", "2", "--inflight", "8"], "--inflight given more than once"),
        (["--warm-passes", "2", "--warm-passes", "3"], "--warm-passes given more than once"),
        (["--inflight", "0"], "argument --inflight: must be 1 or more, not 0"),
        (["--inflight", "5000"], "argument --inflight: must be 4096 or less, not 5000"),
        (["--warm-passes", "1e20"], "argument --warm-passes: '1e20' is not a whole number"),
        (["--shared-prefix", "1.5"], "argument --shared-prefix: lengths '1.5'"),
        (["--shared-prefix", "2000k"], "every length must be 1 token or more and 1048576 or less"),
        (["--variant", "../radix"], "argument --variant: '../radix': a name that becomes a file"),
        (["--card", "H200"], "argument --card: 'H200': a name that becomes a file"),
        (["--recipe-name", "a/b"], "argument --recipe-name: 'a/b': a name that becomes a file"),
    ],
)
def test_warm_options_follow_every_verbs_rules(extra, message, tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        main(["warm", "sglang+http://127.0.0.1:9", *extra, "--out", str(tmp_path / "o")])
    assert stop.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "o").exists()  # refused before anything was written


def test_a_warm_verdict_says_what_it_compared(prompt_file, tmp_path, capsys):
    with CannedSGLang("radix") as server:
        assert main(_warm(server.url, prompt_file, tmp_path / "o", "--warm-passes", "2")) == 0
    said = (
        f"compared: every token id, logprob and top-{TOP} alternative (id and logprob) at "
        f"{2 * PROMPTS * NEW} positions of {2 * PROMPTS} answers"
    )
    assert said in capsys.readouterr().out
    assert f"C{said[1:]}." in (tmp_path / "o" / "warm.md").read_text()
    assert "in every token id, logprob and top-" not in (tmp_path / "o" / "warm.md").read_text()


def test_an_answer_that_cannot_be_compared_is_never_equal(prompt_file, tmp_path, capsys):
    with CannedSGLang("radix-empty") as server:
        assert main(_warm(server.url, prompt_file, tmp_path / "o")) == 2
    err = capsys.readouterr().err
    assert "prompt 'p0#cold': the answer holds no tokens; an answer not compared in full" in err
    assert not (tmp_path / "o" / "warm.md").exists()


def test_a_stored_answer_that_fails_the_gate_is_redone(prompt_file, tmp_path, capsys):
    """A results file edited (or written by an older bitexact) to hold an empty warm answer: on resume
    that row is refused and asked again, never compared as it is."""
    out = tmp_path / "o"
    with CannedSGLang("radix") as server:
        argv = _warm(server.url, prompt_file, out)
        assert main(argv) == 0
        (results,) = out.glob("warm-sglang*.jsonl")
        lines = results.read_text().splitlines()
        rows = [json.loads(line) for line in lines[1:]]
        (edited,) = [r for r in rows if r["id"] == "p2#warm1"]
        edited["generation"].update(token_ids=[], logprobs=[], top_logprobs=[])
        results.write_text("\n".join([lines[0], *(json.dumps(r) for r in rows)]) + "\n")
        sent = len(server.requests)
        capsys.readouterr()
        assert main(argv) == 0
        err = capsys.readouterr().err
        again = [r["body"] for r in server.requests[sent:]]
    assert "the stored result of 'p2#warm1' is refused (the answer holds no tokens); it is redone" in err
    # Only p2's warm answer again. Its fills come first: the cache was flushed since (before the cold
    # answers of p3 to p5), so the first fill finds nothing and caches p2, the second hits
    p2 = json.loads(prompt_file.read_text().splitlines()[2])["input_ids"]
    assert [(b["input_ids"], b["sampling_params"]["max_new_tokens"]) for b in again] == [
        (p2, 1),
        (p2, 1),
        (p2, NEW),
    ]


def test_one_warm_command_per_out_and_force_moves_the_first_aside(prompt_file, tmp_path, capsys):
    """A golden record, its check and a warm run against the golden share an --out (their files differ);
    another warm command there is refused, naming --force, which moves the first run aside."""
    out = tmp_path / "o"
    with CannedSGLang("radix") as server:
        engine = f"sglang+{server.url}"
        common = ["--prompts", str(prompt_file), *SETTINGS, "--out", str(out)]
        key = ["--recipe-name", "r", "--card", "h200", "--golden", str(tmp_path / "g.json")]
        assert main(["golden", "record", engine, *key, *common]) == 0
        assert main(["golden", "check", engine, *key, "--out", str(out)]) == 0
        assert main(["warm", engine, *key, "--out", str(out)]) == 0
        capsys.readouterr()
        other = _warm(server.url, prompt_file, out, "--warm-passes", "2")
        assert main(other) == 2
        err = capsys.readouterr().err
        assert "holds the run of another `bitexact warm` command" in err and "--force" in err
        assert main([*other, "--force"]) == 0
    (moved,) = (out / "replaced").glob("run-*")
    assert {"warm.md", "golden-check.md", "golden-record.md"} <= {p.name for p in moved.iterdir()}
    record = json.loads((out / ".bitexact-run.json").read_text())
    assert list(record["runs"]) == ["warm"] and record["runs"]["warm"]["identity"]["warm_passes"] == 2


def _gen(meta: dict[str, object]) -> Generation:
    return Generation("p#warm1", [1], [-0.5], [[(1, -0.5), (2, -1.5)]], meta=meta)


@pytest.mark.parametrize(
    ("meta", "count"),
    [
        ({"cached_tokens": 4, "prompt_tokens": 5}, 4),
        ({"cached_tokens": 0}, 0),
        ({}, None),  # no count: no hit, and a warm pass refuses it
        ({"usage": {"prompt_tokens": 5, "prompt_tokens_details": {"cached_tokens": 3}}}, 3),
        ({"usage": {"prompt_tokens": 5}}, None),
        ({"cached_tokens": True, "prompt_tokens": 5}, EngineError),
        ({"cached_tokens": -1, "prompt_tokens": 5}, EngineError),
        ({"cached_tokens": "3", "prompt_tokens": 5}, EngineError),
        ({"cached_tokens": 3.0, "prompt_tokens": 5}, EngineError),
        ({"cached_tokens": 6, "prompt_tokens": 5}, EngineError),
        ({"usage": {"prompt_tokens": 2, "prompt_tokens_details": {"cached_tokens": 3}}}, EngineError),
    ],
)
def test_a_count_of_cached_tokens_is_read_strictly(meta, count):
    if count is EngineError:
        with pytest.raises(
            EngineError, match=r"prompt 'p#warm1': the server reports .* cached prompt tokens"
        ):
            cached_tokens(_gen(meta))
    else:
        assert cached_tokens(_gen(meta)) == count


def test_a_server_reporting_an_impossible_count_is_an_engine_error(prompt_file, tmp_path, capsys):
    with CannedSGLang("radix-bad-count") as server:
        assert main(_warm(server.url, prompt_file, tmp_path / "o")) == 2
    err = capsys.readouterr().err
    # the answer's strict reader (engines/values.py) names the field and the server
    assert f"{server.url}/generate ('p0#cold'): meta_info.cached_tokens is '-1', not a count" in err
    assert "Traceback" not in err
