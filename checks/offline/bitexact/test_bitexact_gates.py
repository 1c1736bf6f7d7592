"""The bad-input mechanisms beyond the catalogue's single cases (reliability_cases_bitexact_*.py hold
those): the answer gate and the verdict's account of what it compared, one command per verb in an --out,
the same engine known by what it says of itself, an unforeseen error as one line and a file, and the
drift page's changes in words. Against real local servers in SGLang's shapes (canned_sglang.py)."""

from __future__ import annotations

import json

import pytest
from bitexact import buildchanges
from bitexact.answers import problem
from bitexact.cli import main
from bitexact.engines.base import Settings
from bitexact.engines.instance import same_engine
from bitexact.engines.sglang_http import SGLangHttpEngine
from bitexact.engines.spec import parse_engine
from bitexact.generation import Generation
from checkhelpers.canned_sglang import CannedSGLang

SETTINGS = ["--max-new-tokens", "4", "--top-logprobs", "2"]


def _gen(n: int, finish: str | None = "length", k: int = 2, lp: float = -0.5) -> Generation:
    return Generation(
        "p",
        list(range(n)),
        [lp] * n,
        [[(t, lp), (t + 1, lp - 1)][:k] for t in range(n)],
        meta={"finish_reason": finish},
    )


@pytest.mark.parametrize(
    ("gen", "refused"),
    [
        (_gen(4), None),
        (_gen(2, finish="stop"), None),  # stopped at a stop token: compared as it is, length included
        (_gen(2, finish="length"), "holds 2 of the 4 tokens asked, without a stop reason"),
        (_gen(2, finish="abort"), "without a stop reason (finish reason 'abort')"),
        (_gen(0, finish="stop"), "holds no tokens"),
        (_gen(5), "more than the 4 asked"),
        (_gen(4, k=1), "position 0: 1 top-k alternatives, not the 2 asked"),
        (_gen(4, lp=0.25), "above 0 (a probability above 1)"),
        (_gen(4, lp=float("nan")), "is nan"),
    ],
)
def test_the_answer_gate(gen, refused):
    found = problem(gen, Settings(max_new_tokens=4, top_logprobs=2))
    assert (found is None) if refused is None else (refused in (found or "")), found


def test_a_verdict_says_what_it_compared(tmp_path, capsys):
    (tmp_path / "p.jsonl").write_text('{"id": "a", "input_ids": [1, 2]}\n{"id": "b", "input_ids": [3]}\n')
    with CannedSGLang() as server:
        argv = ["parity", f"sglang+{server.url}", f"sglang+{server.url}", "--allow-same-engine"]
        assert (
            main([*argv, "--prompts", str(tmp_path / "p.jsonl"), *SETTINGS, "--out", str(tmp_path / "o")])
            == 0
        )
    line = capsys.readouterr().out
    assert (
        "compared: every token id, logprob and top-2 alternative (id and logprob) at 8 positions of 2 prompts"
        in line
    )
    assert "Compared: every token id" in (tmp_path / "o" / "parity.md").read_text()


def test_one_command_per_verb_in_an_out(tmp_path, capsys):
    """A golden record and its check share an --out (their files differ); a second parity of other
    engines is refused there; the same command again resumes (nothing asked twice); --force moves the
    first run aside, never deletes it."""
    (tmp_path / "p.jsonl").write_text('{"id": "a", "input_ids": [1, 2]}\n')
    out = str(tmp_path / "o")
    with CannedSGLang() as one, CannedSGLang("drift") as two:
        common = ["--prompts", str(tmp_path / "p.jsonl"), *SETTINGS, "--out", out]
        key = ["--recipe-name", "r", "--card", "h200", "--golden", str(tmp_path / "g.json")]
        assert main(["golden", "record", f"sglang+{one.url}", *key, *common]) == 0
        assert main(["golden", "check", f"sglang+{one.url}", *key, *common]) == 0
        parity = ["parity", f"sglang+{one.url}", f"sglang+{two.url}", *common]
        assert main(parity) == 1  # `drift` moves one logprob
        served = one.served
        assert main(parity) == 1 and one.served == served  # the same command: resumed, nothing redone
        other = ["parity", f"sglang+{two.url}", f"sglang+{one.url}", *common]
        capsys.readouterr()
        assert main(other) == 2
        assert "holds the run of another `bitexact parity` command" in capsys.readouterr().err
        assert main([*other, "--force"]) == 1
    (moved,) = (tmp_path / "o" / "replaced").glob("run-*")
    assert (moved / "parity.md").is_file() and (moved / "golden-check.md").is_file()
    record = json.loads((tmp_path / "o" / ".bitexact-run.json").read_text())
    assert list(record["runs"]) == ["parity"] and record["runs"]["parity"]["identity"]["a"].endswith(
        str(two.port)
    )


def _same(raw_a: str, ident_a, raw_b: str, ident_b):
    return same_engine(parse_engine(raw_a), ident_a, parse_engine(raw_b), ident_b)


def test_the_same_engine_is_known_by_what_it_says_of_itself():
    with CannedSGLang() as one, CannedSGLang() as two:
        ident = {}
        for raw in (f"sglang+{one.url}", f"sglang+http://localhost:{one.port}", f"sglang+{two.url}"):
            engine = SGLangHttpEngine(parse_engine(raw))
            ident[raw] = engine.identity()
        a, b, c = ident
        assert _same(a, ident[a], b, ident[b]) == "one server: the same identity and the same start time"
        assert _same(a, ident[a], c, ident[c]) is None  # same build, same args: another server
        port = one.port
    with CannedSGLang(port=port) as restarted:  # same address, a new start: another engine
        again = SGLangHttpEngine(parse_engine(f"sglang+{restarted.url}")).identity()
    assert _same(a, ident[a], a, again) is None
    # without a start time, the address decides: localhost resolves to the loopback address
    assert _same(a, {}, b, {}) and not _same(a, {}, c, {})
    assert _same("hf:/m/../m", None, "hf:/m", None) and not _same("hf:/m", None, "hf:/m?batch=2", None)


def test_an_unforeseen_error_is_one_line_and_a_file(tmp_path, capsys, monkeypatch):
    import bitexact.commands.history as history_verb

    def broken(args, engines):
        return 1 / 0

    monkeypatch.setattr(history_verb, "run", broken)
    out = tmp_path / "o"
    assert main(["history", "h200", "--history", str(tmp_path / "h.jsonl"), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(
        "bitexact: internal error: ZeroDivisionError: division by zero in test_bitexact_gates.py"
    )
    (report,) = out.glob("bitexact-crash-*.txt")
    assert str(report) in err and "Traceback (most recent call last)" in report.read_text()


LAUNCH = (
    "--model-path m --attention-backend triton --mem-fraction-static 0.88 --disable-radix-cache "
    "--host 127.0.0.1 --port 30000"
)


def test_changes_between_builds_in_words():
    old = {
        "engine.launch_command": LAUNCH,
        "engine.attention_backend": "triton",
        "engine.server_args_sha256": "a" * 64,
        "build.sglang.patches": "0001-a.patch 0002-b.patch 0003-c.patch 0004-d.patch 0005-e.patch",
        "build.sglang.tree": "1" * 64,
        "build.recipe.sha256": "2" * 64,
    }
    new = {
        **old,
        "engine.launch_command": LAUNCH.replace("triton", "flashinfer").replace("30000", "30002"),
        "engine.attention_backend": "flashinfer",
        "engine.server_args_sha256": "b" * 64,
        "build.sglang.patches": "none (stock)",
        "build.sglang.tree": "3" * 64,
    }
    changes = [(k, old.get(k), new.get(k)) for k in sorted(old) if old.get(k) != new.get(k)]
    assert buildchanges.in_words(changes) == [
        ("patch series", "5 patches", "none (stock)"),
        ("--attention-backend", "triton", "flashinfer"),  # the port is where it listens: left out
    ]  # the args' digest and the tree's are explained by those; the attention field by the argument
    fewer = [
        (
            "build.sglang.patches",
            old["build.sglang.patches"],
            "0001-a.patch 0002-b.patch 0004-d.patch 0005-e.patch",
        )
    ]
    assert buildchanges.in_words(fewer) == [("patch series", "5 patches", "4 patches (without 0003-c.patch)")]
    # a tree digest that moved with nothing else to say why is shown, shortened
    assert buildchanges.in_words([("build.sglang.tree", "1" * 64, "3" * 64)]) == [
        ("build.sglang.tree", "111111111111", "333333333333")
    ]
    flag = [("engine.launch_command", LAUNCH, LAUNCH.replace(" --disable-radix-cache", ""))]
    assert buildchanges.in_words(flag) == [("--disable-radix-cache", "(set)", "-")]
