"""Classes of bad input, one case of each beside the obvious ones, each against the mechanism that holds
the whole class (the answer gate, the strict JSON reader, the command line's number reader, the run's own
files in an --out, the same-engine test, the history line's shape, the checks of a path before a run).
Real local servers in SGLang's shapes (canned_sglang.py) where an engine answers."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from bitexact import strictjson
from bitexact.answers import problem
from bitexact.argv import count, parse_lengths
from bitexact.cli import main
from bitexact.engines.base import Settings
from bitexact.errors import UsageError
from bitexact.generation import Generation
from checkhelpers.canned_sglang import CannedSGLang

SETTINGS = ["--max-new-tokens", "4", "--top-logprobs", "2"]


def _prompts(tmp_path: Path) -> Path:
    path = tmp_path / "p.jsonl"
    path.write_text('{"id": "a", "input_ids": [1, 2]}\n{"id": "b", "input_ids": [3]}\n')
    return path


def _gen(ids: list[int], alternative: int = 99) -> Generation:
    return Generation(
        "p",
        ids,
        [-0.5] * len(ids),
        [[(t, -0.5), (alternative, -1.5)] for t in ids],
        meta={"finish_reason": "length"},
    )


# --- class 1: an answer that was not fully compared counts as equal -----------------------------------


@pytest.mark.parametrize(
    ("gen", "refused"),
    [
        (_gen([1, 2, 3, 4]), None),
        (_gen([-5, 2, 3, 4]), "position 0: the token id -5 is not a token id"),
        (_gen([1, 2, 2**31, 4]), "position 2: the token id 2147483648 is not a token id"),
        (_gen([1, 2, 3, 4], alternative=-1), "position 0: the top-k alternative -1 is not a token id"),
    ],
)
def test_an_id_no_engine_can_produce_is_refused(gen, refused):
    found = problem(gen, Settings(max_new_tokens=4, top_logprobs=2))
    assert (found is None) if refused is None else (refused in (found or "")), found


@pytest.mark.parametrize(
    ("behaviour", "message"),
    [
        ("badid", "position 0: the token id -5 is not a token id"),
        ("dupkey", "answered JSON that cannot be read one way: the key 'output_ids' is given twice"),
    ],
)
def test_two_servers_alike_in_what_cannot_be_compared_are_not_equal(tmp_path, capsys, behaviour, message):
    """Both sides send the same impossible id, or the same answer with `output_ids` twice: before, EQUAL."""
    with CannedSGLang(behaviour) as one, CannedSGLang(behaviour) as two:
        argv = ["parity", f"sglang+{one.url}", f"sglang+{two.url}", "--prompts", str(_prompts(tmp_path))]
        assert main([*argv, *SETTINGS, "--out", str(tmp_path / "o")]) == 2
    assert message in capsys.readouterr().err


# --- class 2: inputs that are not what they seem ------------------------------------------------------


def test_a_number_too_long_to_read_is_a_json_error_not_a_crash(tmp_path, capsys):
    with pytest.raises(strictjson.StrictJSONError, match="a number too long to read"):
        strictjson.loads("[" + "9" * 5000 + "]")
    (tmp_path / "p.jsonl").write_text('{"id": "a", "input_ids": [' + "9" * 5000 + "]}\n")
    with CannedSGLang() as server:
        argv = ["repeat", f"sglang+{server.url}", "-n", "2", "--prompts", str(tmp_path / "p.jsonl")]
        assert main([*argv, *SETTINGS, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "p.jsonl:1: a number too long to read" in err and "internal error" not in err


@pytest.mark.parametrize("text", ["1_0", "+3", "\u0663", "0x10", "3.0"])
def test_counts_are_ascii_digits(text):
    import argparse

    with pytest.raises(argparse.ArgumentTypeError, match="is not a whole number"):
        count(1, 100)(text)


@pytest.mark.parametrize("text", ["1_0", "1e3", "+5", "0.5", "inf"])
def test_lengths_are_digits_with_an_optional_k(text):
    with pytest.raises(UsageError, match="use numbers like 640,2200,128k"):
        parse_lengths(text)
    assert parse_lengths("640, 1.5k,128k") == [640, 1536, 131072]


# --- class 4: one file in two roles, and runs that overwrite runs -------------------------------------


def test_force_moves_only_bitexacts_own_files(tmp_path, capsys, monkeypatch):
    """`--out .` in a project: --force moved the whole folder aside, the prompt file with it (the run
    then found no prompts). Now it moves what bitexact wrote there, and nothing else."""
    monkeypatch.chdir(tmp_path)
    _prompts(tmp_path)
    (tmp_path / "notes.txt").write_text("mine\n")
    with CannedSGLang() as one, CannedSGLang() as two:
        argv = ["parity", f"sglang+{one.url}", f"sglang+{two.url}", "--prompts", "p.jsonl", "--out", "."]
        assert main([*argv, *SETTINGS]) == 0
        assert main([*argv, "--max-new-tokens", "3", "--top-logprobs", "2"]) == 2  # another command
        assert main([*argv, "--max-new-tokens", "3", "--top-logprobs", "2", "--force"]) == 0
    assert (tmp_path / "notes.txt").read_text() == "mine\n" and (tmp_path / "p.jsonl").is_file()
    (moved,) = (tmp_path / "replaced").glob("run-*")
    assert sorted(p.name for p in moved.iterdir() if not p.name.startswith(("A-", "B-"))) == [
        ".bitexact-run.json",
        "parity.html",
        "parity.md",
    ]
    assert "files of yours there stay" in capsys.readouterr().err


def test_a_report_is_never_named_into_another_verbs_files(tmp_path, capsys):
    with CannedSGLang() as server:
        argv = ["parity", f"sglang+{server.url}", f"sglang+{server.url}", "--allow-same-engine"]
        argv += [
            "--name",
            "golden-record",
            "--prompts",
            str(_prompts(tmp_path)),
            "--out",
            str(tmp_path / "o"),
        ]
        assert main([*argv, *SETTINGS]) == 2
        assert server.served == 0  # refused before anything ran
    assert "`bitexact golden record` names its files so" in capsys.readouterr().err


# --- class 5: the same engine under another name ------------------------------------------------------


def test_one_server_through_two_apis_is_one_engine(tmp_path, capsys):
    """SGLang's native API and its OpenAI-compatible one reach the same scheduler: parity of the two
    said EQUAL about one server. Two servers of one build, each through its own API, are two."""
    with CannedSGLang() as one, CannedSGLang() as two:
        openai = f"openai+{one.url}/v1?model=Qwen/Qwen3.8-27B"
        common = ["--prompts", str(_prompts(tmp_path)), *SETTINGS]
        assert main(["parity", f"sglang+{one.url}", openai, *common, "--out", str(tmp_path / "o")]) == 2
        assert "one server, reached through two APIs (sglang and openai)" in capsys.readouterr().err
        assert one.served == 0
        assert main(["parity", f"sglang+{two.url}", openai, *common, "--out", str(tmp_path / "o2")]) == 0


# --- class 8: history lines of the right kind but the wrong shape -------------------------------------


def _line(**changes: object) -> dict:
    from checkhelpers.reliability_setup import HISTORY_LINE

    return {**json.loads(HISTORY_LINE), **changes}


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({}, None),
        ({"equal": 1, "tokens_differ": 1}, "its verdict EQUAL disagrees with its counts"),
        ({"verdict": "DIFFERENT"}, "its verdict DIFFERENT disagrees with its counts"),
        ({"prompts": -5, "equal": 9}, "its counts are impossible"),
        ({"at": "yesterday"}, "'at' is \"yesterday\", not a time"),
        (
            {
                "verdict": "DIFFERENT",
                "equal": 1,
                "touched": ["p0"],
                "first_divergence": {"prompt": "p0", "position": -1, "differs_in": None, "margin": None},
            },
            "at position -1, before the first token",
        ),
    ],
)
def test_a_history_line_must_agree_with_itself(changes, why):
    from bitexact.history import shape_problem

    found = shape_problem(_line(**changes))
    assert (found is None) if why is None else (why in (found or "")), found


def test_a_line_of_impossible_counts_is_not_read_as_no_drift(tmp_path, capsys):
    lines = [_line(), _line(equal=1, tokens_differ=1, build={"label": "b2", "components": {"x": "2"}})]
    (tmp_path / "h.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    argv = ["history", "h200", "--history", str(tmp_path / "h.jsonl"), "--out", str(tmp_path / "o")]
    assert main([*argv, "--json"]) == 0
    captured = capsys.readouterr()
    assert "h.jsonl:2: its verdict EQUAL disagrees with its counts" in captured.err
    assert len(json.loads(captured.out)["checks"]) == 1


# --- class 9: misleading messages ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda p: p.symlink_to(p.name), "is a symbolic link loop"),
        (lambda p: p.symlink_to("nowhere"), "is a symbolic link to nowhere, which does not exist"),
    ],
)
def test_a_history_that_is_a_broken_link_is_named_so(tmp_path, capsys, make, said):
    make(tmp_path / "h.jsonl")
    argv = ["history", "h200", "--history", str(tmp_path / "h.jsonl"), "--out", str(tmp_path / "o")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert said in err and "no history for card" not in err


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda g: g.write_text("a file\n"), "its folder {g} is a file"),
        (lambda g: g.symlink_to("nowhere"), "its folder {g} is a symbolic link to nowhere, which does not"),
    ],
)
@pytest.mark.parametrize("verb", ["record", "check"])
def test_a_golden_folder_that_is_none_is_named_before_anything_runs(tmp_path, capsys, make, said, verb):
    """It failed after the engine ran ("File exists", or "Not a directory" about a temporary file), or
    said "no golden record"."""
    make(tmp_path / "g")
    key = ["--recipe-name", "r", "--card", "h200", "--golden-dir", str(tmp_path / "g")]
    with CannedSGLang() as server:
        argv = ["golden", verb, f"sglang+{server.url}", *key, "--prompts", str(_prompts(tmp_path))]
        assert main([*argv, *SETTINGS, "--out", str(tmp_path / "o")]) == 2
        assert server.served == 0
    err = capsys.readouterr().err
    assert said.format(g=tmp_path / "g") in err and "no golden record" not in err


def test_an_out_inside_a_file_and_a_tokenizer_that_is_none_are_named(tmp_path, capsys):
    (tmp_path / "f").write_text("a file\n")
    (tmp_path / "tok").mkdir()
    common = ["repeat", "sglang+http://127.0.0.1:9?retries=0", "--prompts", str(_prompts(tmp_path))]
    assert main([*common, "--out", str(tmp_path / "f" / "sub")]) == 2
    assert f"its folder {tmp_path / 'f'} is a file" in capsys.readouterr().err
    assert main([*common, "--tokenizer", str(tmp_path / "tok"), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "not a tokenizer transformers can load" in err and "internal error" not in err


def test_a_check_of_some_of_a_goldens_prompts_says_so(tmp_path, capsys):
    key = ["--recipe-name", "r", "--card", "h200", "--golden", str(tmp_path / "g.json")]
    with CannedSGLang() as server:
        common = [f"sglang+{server.url}", *key, "--prompts", str(_prompts(tmp_path)), *SETTINGS]
        assert main(["golden", "record", *common, "--out", str(tmp_path / "o")]) == 0
        assert main(["golden", "check", *common, "--out", str(tmp_path / "o"), "--limit", "1"]) == 0
        line = capsys.readouterr().out
        assert "(a partial check: 1 of the golden's 2 prompts)" in line
        assert main(["golden", "check", *common, "--out", str(tmp_path / "o2")]) == 0
        assert "partial" not in capsys.readouterr().out


@pytest.mark.parametrize(
    ("raw", "said"),
    [
        ("sglang+http://127.0.0.1:1?timeout=1_0", "timeout='1_0' is not a number"),
        ("sglang+http://127.0.0.1:1?retries=1_0", "retries='1_0' is not an integer"),
        ("hf:/m?batch=\u0664", "batch='\u0664' is not an integer"),
        ("sglang+http://user:pw@127.0.0.1:1", "without a user name or password before the host"),
        ("sglang+http://127.0.0.1:1#x", "without a '#' part"),
    ],
)
def test_engine_strings_read_one_way(raw, said):
    """urllib sent "user:pw@127.0.0.1" to the resolver as a host name (and printed the password in
    every retry); float() read "1_0" as 10."""
    from bitexact.engines.spec import parse_engine

    with pytest.raises(UsageError, match=re.escape(said)):
        parse_engine(raw)


# --- class 2 (options): two options that say different things, one silently dropped ------------------


def test_a_recipe_name_keeps_the_recipe_variants_requirement(tmp_path, capsys):
    recipe = Path(__file__).resolve().parents[3] / "nix" / "recipes" / "qwen3.8-27b-exact.json"
    key = [
        "--recipe",
        str(recipe),
        "--recipe-name",
        "n",
        "--card",
        "h200",
        "--golden",
        str(tmp_path / "g.json"),
    ]
    with CannedSGLang() as server:  # does not speculate; the recipe's `recipe` variant must
        argv = ["golden", "record", f"sglang+{server.url}", *key, "--prompts", str(_prompts(tmp_path))]
        assert main([*argv, *SETTINGS, "--out", str(tmp_path / "o")]) == 2
    assert "speculation must run" in capsys.readouterr().err and not (tmp_path / "g.json").exists()


def test_no_history_and_a_history_file_are_refused_together(tmp_path, capsys):
    argv = ["golden", "record", "sglang+http://127.0.0.1:9?retries=0", "--recipe-name", "r", "--card", "h200"]
    argv += ["--golden-dir", str(tmp_path / "g"), "--no-history", "--history", str(tmp_path / "h.jsonl")]
    assert main([*argv, "--out", str(tmp_path / "o")]) == 2
    assert "--no-history and --history" in capsys.readouterr().err


def test_an_answer_of_several_choices_is_refused(tmp_path, capsys):
    with CannedSGLang("twochoices") as server:
        argv = ["repeat", f"openai+{server.url}/v1?model=Qwen/Qwen3.8-27B", "-n", "2"]
        assert (
            main([*argv, "--prompts", str(_prompts(tmp_path)), *SETTINGS, "--out", str(tmp_path / "o")]) == 2
        )
    assert "holds 2 choices, not the one asked (n=1)" in capsys.readouterr().err


def test_a_verdict_over_stopped_answers_says_they_stopped(tmp_path, capsys):
    """Answers shorter than asked with a stop reason pass the gate (the issue's rule): the verdict said
    "at 4 positions of 2 prompts" and nothing of why so few."""
    with CannedSGLang("stopped") as one, CannedSGLang("stopped") as two:
        argv = ["parity", f"sglang+{one.url}", f"sglang+{two.url}", "--prompts", str(_prompts(tmp_path))]
        assert main([*argv, *SETTINGS, "--out", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    assert "at 4 positions of 2 prompts (2 of them stopped before the 4 tokens asked" in out
    assert "stopped before" in (tmp_path / "o" / "parity.md").read_text()


def test_force_never_replaces_another_cards_golden(tmp_path, capsys):
    golden = tmp_path / "g.json"
    with CannedSGLang() as server:
        common = [f"sglang+{server.url}", "--recipe-name", "r", "--golden", str(golden)]
        common += ["--prompts", str(_prompts(tmp_path)), *SETTINGS]
        assert main(["golden", "record", *common, "--card", "h200", "--out", str(tmp_path / "o")]) == 0
        before = golden.read_bytes()
        argv = ["golden", "record", *common, "--card", "h100-nvl", "--force", "--out", str(tmp_path / "o2")]
        assert main(argv) == 2
        assert "is the golden of card 'h200', recipe 'r'" in capsys.readouterr().err
        assert golden.read_bytes() == before
        argv = ["golden", "record", *common, "--card", "h200", "--force", "--out", str(tmp_path / "o3")]
        assert main(argv) == 0  # the same card's and recipe's: replaced, as --force says


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["--vocab-size", "3"], "--vocab-size"),
        (["--seed", "7"], "--seed"),
        (["--vocab-size", "3", "--seed", "1"], "--vocab-size and --seed"),
    ],
)
def test_long_prompt_options_without_long_prompts_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], named: str
) -> None:
    """--vocab-size and --seed shape generated prompts only: with --prompts they changed nothing."""
    argv = ["repeat", "sglang+http://127.0.0.1:9?retries=0", "--prompts", str(_prompts(tmp_path)), *SETTINGS]
    assert main([*argv, *extra, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert f"{named} shape generated long prompts (--long) only" in err and "--prompts" in err
    assert not list((tmp_path / "o").glob("*.jsonl"))  # refused before any request
    # a corrected command in the same --out is not held up by the refused one
    assert main([*argv, "--out", str(tmp_path / "o")]) == 2
    assert "shape generated long prompts" not in capsys.readouterr().err


def test_a_partial_golden_check_reads_as_partial_in_the_history(tmp_path: Path) -> None:
    """golden check --limit 1 against a golden of 2: its history line says how many the golden holds, and
    the drift page's lead and row say the check was partial (its EQUAL is not a whole pass)."""
    from bitexact import drift, history

    found = {"engine": "sglang 0.5.20"}
    golden_ref = {"path": "g.json", "digest": None, "recorded": None, "build": None}
    summary = {"comparisons": [], "equal": 1, "tokens_differ": 0}
    base = dict(card="h200", recipe="r", variant="no-spec", engine="e", golden=golden_ref, found=found)
    line = history.entry(verdict="EQUAL", summary=summary, prompts=1, golden_prompts=2, **base)
    whole = history.entry(verdict="EQUAL", summary=summary, prompts=1, golden_prompts=1, **base)
    assert line["golden_prompts"] == 2 and "golden_prompts" not in whole
    assert history.shape_problem(line) is None and history.shape_problem(whole) is None
    assert "golden_prompts" in (history.shape_problem({**line, "golden_prompts": 0}) or "")
    lead = drift.analyse("h200", [whole, line]).lead()
    assert lead.startswith("NO DRIFT: 2 of 2 checks equal their golden (1 of them partial")
    assert "check 2" in lead
    from bitexact.report.history_page import check_rows

    rows = check_rows(drift.analyse("h200", [line]))
    assert any("1/1 (partial: of 2)" in cell for cell in rows[0])


# Found while extending the fuzzer (test_bitexact_fuzz_*.py), by its new draws run by hand: an answer's
# count of the tokens it generated, or vLLM's spelling of an id, contradicting what the answer holds
# (engines/values.py generated_count and openai_logprobs.id_in_text hold the classes for every dialect).


@pytest.mark.parametrize(
    ("behaviour", "field"),
    [("miscount", "meta_info.completion_tokens"), ("finish-length", "meta_info.finish_reason.length")],
)
def test_a_native_answer_whose_count_contradicts_its_tokens_is_refused(tmp_path, capsys, behaviour, field):
    """SGLang's completion_tokens (len(output_ids)) and FINISH_LENGTH's length (the max_new_tokens
    reached) said 5 beside 4 positions: REPEATABLE, over answers missing a position by their own count."""
    with CannedSGLang(behaviour) as server:
        argv = ["repeat", f"sglang+{server.url}", "-n", "2", "-b", "1", "--prompts", str(_prompts(tmp_path))]
        assert main([*argv, *SETTINGS, "--out", str(tmp_path / "o")]) == 2
    assert f"{field}: the server generated 5 tokens but gave logprobs for 4" in capsys.readouterr().err


def test_a_count_of_another_shape_says_nothing(tmp_path):
    """Only a whole number is a count to hold the positions to (a bool or a string is not one)."""
    from bitexact.engines.values import generated_count

    for counted in (4, None, True, "5", 5.0):
        generated_count(counted, 4, "x", "w")
    with pytest.raises(Exception, match="generated 5 tokens but gave logprobs for 4"):
        generated_count(5, 4, "x", "w")


def test_an_openai_id_spelled_as_no_token_id_is_refused(tmp_path, capsys):
    """`token_id:-3` (and non-ASCII digits, `1_0`) read as text, and then compared by value as an
    alternative named by text; `token_id:٣` was read as the id 3 by str.isdigit."""
    with CannedSGLang("textid") as server:
        argv = ["repeat", f"openai+{server.url}/v1?model=Qwen/Qwen3.8-27B", "-n", "2"]
        argv += ["--prompts", str(_prompts(tmp_path)), *SETTINGS, "--out", str(tmp_path / "o")]
        assert main(argv) == 2
    err = capsys.readouterr().err
    assert "the token 'token_id:-3' is written as vLLM writes token ids (token_id:N) but N is not" in err
    from bitexact.engines.openai_logprobs import id_in_text
    from bitexact.errors import EngineError

    assert id_in_text("token_id:12", "w") == 12 and id_in_text("<12>", "w") is None
    for text in ("token_id:٣", "token_id:1_0", "token_id:+3", "token_id:"):
        with pytest.raises(EngineError):
            id_in_text(text, "w")


@pytest.mark.parametrize(
    "logprobs",
    [
        {"tokens": ["token_id:5"], "token_logprobs": [-0.5], "top_logprobs": -1.5},
        {"tokens": ["token_id:5"], "token_logprobs": [-0.5], "top_logprobs": {"0": {"token_id:5": -0.5}}},
        {"tokens": "token_id:5", "token_logprobs": [-0.5]},
        {"content": [{"token": "token_id:5", "logprob": -0.5, "top_logprobs": 3.0}]},
    ],
)
def test_openai_logprob_lists_that_are_none_are_refused(logprobs):
    """Found by the fuzzer's long run: `top_logprobs` a number ended in an internal error (TypeError:
    len() of a float), in either dialect, and an object in a KeyError; `tokens` a string stays refused."""
    from bitexact.engines.openai_logprobs import parse_logprobs
    from bitexact.errors import EngineError
    from bitexact.prompts import Prompt

    answer = {"choices": [{"index": 0, "logprobs": logprobs, "token_ids": [5], "finish_reason": "length"}]}
    with pytest.raises(EngineError, match="not a list|differ in length"):
        parse_logprobs(Prompt("p", [1]), answer, "w")
