"""Property-based tests (Hypothesis) of the bitexact CLI, run in process against real local HTTP servers
in SGLang's shapes: prompt files, goldens, history lines and command lines drawn at random, and a
server whose answers are drawn (bx_fuzz_servers.py). What must hold for every one of them:

- the exit code is 0, 1, 2 or 130, and nothing unforeseen happened (no traceback, no "internal error");
- nothing outside --out changes, but for what the command is there to write (a new golden where none
  was, a line appended to a history); an existing golden changes only with --force;
- EQUAL and REPEATABLE only when every answer the server sent holds, at every position, a token id, a
  finite logprob <= 0 and the requested top-k alternatives (judged here from the raw answers, by this
  file's own reading of SGLang's shape, not by bitexact's code), and an answer that holds all of that is
  never refused;
- a prompt file is accepted exactly when it is one by the JSON Lines format and the prompt schema
  (this file's own reading again); a golden edited in any way is never passed.

Settings: fuzz_settings.py, as for the other fuzzers (BITEXACT_FUZZ_PROFILE: `ci`, the default, seeded
and bounded, what the offline suite runs; `long` by hand, unseeded, 25 times the examples):

    BITEXACT_FUZZ_PROFILE=long .venv/bin/python -m pytest --rootdir . -p no:cacheprovider \\
        --import-mode=importlib -q --hypothesis-show-statistics checks/offline/bitexact/test_bitexact_fuzz.py
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import math
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from bitexact.cli import main
from bx_fuzz_servers import Digits, ScriptedSGLang, Twice
from hypothesis import event, given
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from canned_sglang import CannedSGLang  # noqa: E402
from fuzz_settings import fuzz  # noqa: E402

EXITS = {0, 1, 2, 130}
NEW, TOP = 4, 2  # what every run asks: few tokens, so an example takes milliseconds
SETTINGS = ["--max-new-tokens", str(NEW), "--top-logprobs", str(TOP)]
PROMPTS = '{"id": "p0", "input_ids": [5, 6, 7]}\n{"id": "p1", "input_ids": [9, 10]}\n'
MAX_ID = 2**31 - 1


# --- running the CLI and judging a run ------------------------------------------------------------


def cli(argv: list[str], cwd: Path) -> tuple[int, str, str]:
    """`bitexact ARGV` in process, in `cwd`: (exit code, stdout, stderr); argparse's exits included."""
    out, err = io.StringIO(), io.StringIO()
    before = Path.cwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as stop:
                code = stop.code if isinstance(stop.code, int) else 2
    finally:
        os.chdir(before)
    return code, out.getvalue(), err.getvalue()


def sound(code: int, stderr: str) -> None:
    """The first invariant: a known exit code, and nothing bitexact did not foresee."""
    event(f"exit {code}")  # --hypothesis-show-statistics counts them
    assert code in EXITS, f"exit {code}\n{stderr}"
    assert "Traceback" not in stderr, stderr
    assert "internal error" not in stderr, stderr


def tree(root: Path, skip: list[Path]) -> dict[str, str]:
    """Every file under `root` but those under `skip`, by the sha256 of its bytes (links by target)."""
    found = {}
    for path in sorted(root.rglob("*")):
        if any(path == s or s in path.parents for s in skip):
            continue
        if path.is_symlink():
            found[str(path.relative_to(root))] = "-> " + os.readlink(path)
        elif path.is_file():
            found[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


@contextlib.contextmanager
def scratch() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="bx-fuzz-") as temp:
        yield Path(temp)


# --- the servers --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def canned() -> Iterator[CannedSGLang]:
    with CannedSGLang("normal") as server:
        yield server


@pytest.fixture(scope="module")
def radix() -> Iterator[CannedSGLang]:
    """The canned values with a prefix cache (answers from it equal those computed afresh): for `warm`."""
    with CannedSGLang("radix") as server:
        yield server


@pytest.fixture(scope="module")
def scripted() -> Iterator[ScriptedSGLang]:
    with ScriptedSGLang() as server:
        yield server


@pytest.fixture(scope="module")
def golden_bytes(canned: CannedSGLang) -> bytes:
    """A real golden: recorded by bitexact from the canned server."""
    with scratch() as root:
        (root / "p.jsonl").write_text(PROMPTS)
        argv = ["golden", "record", f"sglang+{canned.url}", "--recipe-name", "r", "--card", "h200"]
        argv += ["--golden", "g.json", "--prompts", "p.jsonl", *SETTINGS, "--out", "o"]
        code, _, err = cli(argv, root)
        assert code == 0, err
        return (root / "g.json").read_bytes()


# --- prompt files -------------------------------------------------------------------------------------

json_scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)
json_value = st.recursive(
    json_scalar,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
ids = st.lists(st.integers(0, 300), min_size=1, max_size=6)
odd_ids = st.one_of(
    ids,
    st.lists(st.one_of(st.booleans(), st.integers(-5, 2**32), st.floats(), st.text(max_size=3)), max_size=4),
    json_value,
)
prompt_key = st.sampled_from(["id", "input_ids", "text", "input_id", "Text", ""])


@st.composite
def prompt_line(draw: st.DrawFn, index: int = 0) -> str:
    """A line of a prompt file: two in three whole prompts, the others near one or anything at all."""
    if draw(st.integers(0, 2)) > 0:
        body = (
            {"input_ids": draw(ids)}
            if draw(st.booleans())
            else {"text": draw(st.text(min_size=1, max_size=8))}
        )
        return json.dumps({"id": draw(st.sampled_from([f"p{index}", index])), **body})
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return draw(st.text(max_size=30))
    if kind == 1:
        return json.dumps(draw(json_value))
    obj: dict[str, Any] = {}
    pid = draw(st.one_of(st.text(min_size=1, max_size=6), st.integers(-3, 50), json_scalar))
    if draw(st.integers(0, 9)) > 0:
        obj["id"] = pid
    body = draw(st.integers(0, 5))
    if body in (0, 1, 4):
        obj["input_ids"] = draw(ids if body == 0 else odd_ids)
    if body in (2, 3, 4):
        lone = st.sampled_from(["\ud800", "a\udfff", "\udc80b"])  # lone surrogates: JSON escapes allow them
        obj["text"] = draw(st.one_of(st.text(max_size=8), lone) if body == 2 else json_value)
    if draw(st.integers(0, 7)) == 0:
        obj[draw(prompt_key)] = draw(json_value)
    text = json.dumps(obj, ensure_ascii=draw(st.booleans()) or not _text(json.dumps(obj, ensure_ascii=False)))
    if draw(st.integers(0, 9)) == 0 and len(obj) > 1:  # a key given twice
        key = next(iter(obj))
        text = text[:-1] + f", {json.dumps(key)}: {json.dumps(obj[key])}" + "}"
    return text


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not standard JSON")


def _text(value: Any) -> bool:
    """A string that is text: encodable as UTF-8 (no lone surrogate, which JSON's \\u escapes allow)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def reads_as_prompts(data: bytes) -> bool:
    """This test's own reading of the --prompts format: UTF-8, JSON Lines split at "\\n" only, each
    non-blank line an object of 'id' (a non-empty string without control characters, or an int) and
    exactly one of 'input_ids' (a non-empty list of ints from 0 to 2**31-1) or 'text' (a non-empty
    string), strings that are text (UTF-8), no other key, no key twice, no id twice, at least one
    prompt."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return False

    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        if len({k for k, _ in pairs}) != len(pairs):
            raise ValueError("a key twice")
        return dict(pairs)

    seen: set[str] = set()
    for line in text.split("\n"):
        if not line.strip(" \t\r"):
            continue
        try:
            obj = json.loads(line, object_pairs_hook=unique, parse_constant=_no_constant)
        except (ValueError, RecursionError):
            return False
        if not isinstance(obj, dict) or "id" not in obj or set(obj) - {"id", "input_ids", "text"}:
            return False
        pid = obj["id"]
        is_int = isinstance(pid, int) and not isinstance(pid, bool)
        printable = isinstance(pid, str) and all(ord(c) >= 32 and not 127 <= ord(c) < 160 for c in pid)
        if not is_int and not (printable and pid and _text(pid)):
            return False
        if ("input_ids" in obj) == ("text" in obj):
            return False
        if "input_ids" in obj:
            value = obj["input_ids"]
            if not isinstance(value, list) or not value:
                return False
            if not all(isinstance(t, int) and not isinstance(t, bool) and 0 <= t <= MAX_ID for t in value):
                return False
        elif not isinstance(obj["text"], str) or not obj["text"] or not _text(obj["text"]):
            return False
        key = str(pid)
        if key in seen:
            return False
        seen.add(key)
    return bool(seen)


separators = st.sampled_from(["\n"] * 5 + ["\r\n", "\n\n", "\u2028", "\x85", "\x1c"])  # mostly line ends


@st.composite
def prompt_file(draw: st.DrawFn) -> bytes:
    """The bytes of a prompt file: lines and what ends them (a line end, or a character that
    `str.splitlines` takes for one), or, now and then, any bytes at all."""
    if draw(st.integers(0, 9)) == 0:
        return draw(st.binary(max_size=40))
    count = draw(st.integers(0, 5))
    return "".join(draw(prompt_line(i)) + draw(separators) for i in range(count)).encode()


@fuzz(examples=400)
@given(data=prompt_file())
def test_a_prompt_file_is_read_as_its_format_defines_it(canned, data):
    with scratch() as root:
        (root / "p.jsonl").write_bytes(data)
        engine = f"sglang+{canned.url}?retries=0"
        argv = ["repeat", engine, "-n", "2", "-b", "1", "--prompts", "p.jsonl", *SETTINGS]
        code, _, err = cli([*argv, "--out", "o"], root)
        sound(code, err)
        valid = reads_as_prompts(data)
        assert code == (0 if valid else 2), f"format says {'valid' if valid else 'invalid'}: {data!r}\n{err}"
        if not valid:  # refused as a prompt file, by a message that names it, before any request
            assert "p.jsonl" in err and not list((root / "o").glob("repeat-*.jsonl")), f"{data!r}\n{err}"
        assert (root / "p.jsonl").read_bytes() == data


# --- goldens --------------------------------------------------------------------------------------


def _paths(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [at]
    if isinstance(value, dict):
        for key, inner in value.items():
            found += _paths(inner, (*at, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            found += _paths(inner, (*at, index))
    return found


@st.composite
def edited_golden(draw: st.DrawFn, original: bytes) -> bytes:
    """The golden with one to three edits: a value replaced, a key or item dropped, or bytes cut."""
    if draw(st.integers(0, 9)) == 0:
        cut = draw(st.integers(0, len(original) - 1))
        return original[:cut] + draw(st.binary(max_size=4))
    record = json.loads(original)
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(record)[1:]
        at = draw(st.sampled_from(paths))
        parent = record
        for step in at[:-1]:
            parent = parent[step]
        if draw(st.booleans()):
            parent[at[-1]] = draw(json_value)
        elif isinstance(parent, dict):
            del parent[at[-1]]
        else:
            parent.pop(at[-1])
    return json.dumps(record, indent=draw(st.sampled_from([None, 1]))).encode()


@fuzz(examples=400)
@given(data=st.data())
def test_an_edited_golden_never_passes_and_is_never_changed(canned, golden_bytes, data):
    edited = data.draw(edited_golden(golden_bytes))
    with scratch() as root:
        (root / "g.json").write_bytes(edited)
        argv = ["golden", "check", f"sglang+{canned.url}", "--recipe-name", "r", "--card", "h200"]
        code, _, err = cli([*argv, "--golden", "g.json", "--out", "o"], root)
        sound(code, err)
        assert (root / "g.json").read_bytes() == edited
        try:
            same = json.loads(edited) == json.loads(golden_bytes)
        except ValueError:
            same = False
        assert (code == 0) == same, f"exit {code} for an edited golden:\n{err}"


# --- history lines ---------------------------------------------------------------------------------

HISTORY = {
    "kind": "bitexact-history", "schema": 1, "at": "2026-12-01T00:00:00+00:00", "verdict": "DIFFERENT",
    "card": "h200", "recipe": "r", "variant": "recipe", "engine": "sglang+http://h:1",
    "golden": {"path": "g.json", "digest": "0" * 64, "recorded": None, "build": None},
    "build": {"label": "0123456789ab", "components": {"bitexact": "0.1.0", "build.sglang.patches": "a b"}},
    "prompts": 2, "equal": 1, "tokens_differ": 1, "touched": ["p0"],
    "first_divergence": {"prompt": "p0", "position": 1, "differs_in": "logprob", "margin": 0.5,
                         "token_flip": False},
}  # fmt: skip


@st.composite
def history_line(draw: st.DrawFn) -> str:
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return draw(st.text(max_size=20))
    line = json.loads(json.dumps(HISTORY))
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.sampled_from(_paths(line)[1:]))
        parent = line
        for step in at[:-1]:
            parent = parent[step]
        parent[at[-1]] = draw(json_value)
    if draw(st.integers(0, 2)) == 0:  # a partial check's count of the golden's prompts, of any shape
        line["golden_prompts"] = draw(golden_prompts(line.get("prompts")))
    return json.dumps(line)


def golden_prompts(prompts: Any) -> st.SearchStrategy[Any]:
    """`golden_prompts` beside a line's `prompts`: equal, larger (a partial check), smaller (a golden of
    fewer prompts than were checked), or not a count at all."""
    n = prompts if isinstance(prompts, int) and not isinstance(prompts, bool) else 2
    return st.one_of(
        st.sampled_from(
            [n, n + 1, n + 1000, n - 1, 0, -1, 2**63, True, False, None, float(n + 1), str(n + 1)]
        ),
        st.integers(n - 5, n + 5),
        json_value,
    )


@fuzz(examples=400)
@given(lines=st.lists(history_line(), max_size=5), torn=st.booleans(), diff=st.booleans())
def test_history_lines_of_any_shape_are_never_fatal(lines, torn, diff):
    with scratch() as root:
        text = "".join(line + "\n" for line in lines) + ('{"kind": "bitexact-hist' if torn else "")
        (root / "h.jsonl").write_text(text)
        argv = ["history", "h200", "--history", "h.jsonl", "--out", "o"]
        code, out, err = cli([*argv, *(["--diff", "B1", "1"] if diff else [])], root)
        sound(code, err)
        assert code in (0, 2)
        if code == 0:
            assert (root / "o" / "history-h200.html").is_file() and "history: " in out


# --- server answers ---------------------------------------------------------------------------------

finite_lp = st.floats(-30, 0, allow_nan=False).map(lambda x: -abs(x))
odd_lp = st.one_of(
    st.floats(),  # NaN, infinities, positive values
    st.integers(-3, 3),
    st.booleans(),
    st.none(),
    st.text(max_size=3),
)
token = st.integers(0, 500)
out_of_range = st.one_of(  # whole numbers no engine sends as a token id (ids are int32 and never negative)
    st.integers(-(2**40), -1),
    st.integers(MAX_ID + 1, 2**40),
    st.sampled_from([-1, -(2**31), MAX_ID + 1, 2**32, 2**63, 2**64, 10**30]),
)
odd_token = st.one_of(
    st.booleans(), out_of_range, st.integers(-(2**40), 2**40), st.floats(), st.text(max_size=3), st.none()
)
# numbers spelled as no server's writer spells them: more digits than Python reads (its int() limit is
# 4300), a float of 5000 digits, exponents beyond a double's range, a long number that is still finite
long_number = st.sampled_from(
    [
        "1" * 5000,
        "-" + "9" * 5000,
        "3" + "0" * 4400,
        "-0." + "0" * 5000 + "1",
        "-1" + "0" * 400 + ".5",
        "-" + "3" * 5000 + "e-4990",
        "-1e400",
        "1e400",
        "-1e-400",
        "2" + "0" * 20,
    ]
)


def _at(value: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        value = value[step]
    return value


@st.composite
def twisted(draw: st.DrawFn, answer: Any, broken: bool) -> Any:
    """`answer`, in a broken one now and then: a number at any place spelled as `long_number`, or a key
    given twice in one object (the same value again, or another), as `render` writes them."""
    if not broken or not isinstance(answer, dict):
        return answer
    if draw(st.integers(0, 5)) == 0:
        answer = json.loads(json.dumps(answer))
        at = draw(st.sampled_from(_paths(answer)[1:]))
        _at(answer, at[:-1])[at[-1]] = Digits(draw(long_number))
    if draw(st.integers(0, 5)) == 0:
        objects = [p for p in _paths(answer) if isinstance(_at(answer, p), dict) and _at(answer, p)]
        at = draw(st.sampled_from(objects))
        key = draw(st.sampled_from(sorted(_at(answer, at))))
        again = draw(st.one_of(st.just(_at(answer, at)[key]), json_value))
        return Twice(answer, at, key, again)
    return answer


def _finish(draw: st.DrawFn, n: int, toks: list[Any]) -> Any:
    """A finish reason in SGLang's shape that may contradict the answer's length: a cap reached at
    another length, a stop (matched at a token or a string), an abort, none."""
    return draw(
        st.sampled_from(
            [
                {"type": "length"},
                {"type": "length", "length": n + 1},
                {"type": "length", "length": max(n - 1, 0)},
                {"type": "length", "length": NEW},
                {"type": "stop"},
                {"type": "stop", "matched": toks[-1] if toks else 0},
                {"type": "stop", "matched": "</s>"},
                {"type": "abort", "message": "aborted"},
                None,
                "stop",
                math.nan,  # a reason that is no text at all (written as the literal NaN)
            ]
        )
    )


@st.composite
def drawn_answer(draw: st.DrawFn) -> Any:
    """One answer to `/generate` in SGLang's shape, whole or with some of it missing or broken."""
    if draw(st.integers(0, 19)) == 0:
        return draw(json_value)
    # Half the answers whole; in the others, each part is broken with a chance of one in six.
    broken = draw(st.booleans())
    rare = lambda: broken and draw(st.integers(0, 5)) == 0  # noqa: E731
    n = draw(st.sampled_from([NEW, NEW, NEW, NEW - 1, 0, NEW + 1])) if rare() else NEW
    toks = [draw(odd_token) if rare() else draw(token) for _ in range(n)]
    lps = [draw(odd_lp) if rare() else draw(finite_lp) for _ in range(n)]
    entries: list[Any] = [[lp, t, None] for lp, t in zip(lps, toks, strict=True)]
    if rare() and entries:
        entries[draw(st.integers(0, len(entries) - 1))] = draw(json_value)
    tops: list[Any] = []
    for t, lp in zip(toks, lps, strict=True):
        k = draw(st.integers(0, TOP + 1)) if rare() else TOP
        tops.append(
            [
                [draw(odd_lp) if rare() else draw(finite_lp), draw(odd_token if rare() else token), None]
                for _ in range(k)
            ]
        )
        if k and not rare():
            tops[-1][0] = [lp, t, None]  # greedy: the chosen token is the first alternative
    if rare():
        tops = draw(st.sampled_from([None, tops[:1], [], tops + tops[:1]]))
    finish: Any = {"type": "length", "length": n}
    if n < NEW and draw(st.booleans()):  # a short answer that says it stopped (at its last token)
        finish = {"type": "stop", "matched": toks[-1] if toks else 0}
    meta: dict[str, Any] = {
        "id": "x",
        "finish_reason": _finish(draw, n, toks) if rare() else finish,
        "prompt_tokens": 3,
        "completion_tokens": draw(st.sampled_from([n + 1, max(n - 1, 0), NEW, 0, "4"])) if rare() else n,
        "output_token_logprobs": entries,
        "output_top_logprobs": tops,
    }
    if rare():  # a count of cached prompt tokens of its own (else the server's cache gives one)
        meta["cached_tokens"] = draw(
            st.one_of(st.integers(-2, 6), st.booleans(), st.none(), st.text(max_size=2))
        )
    if rare():  # the prompt's length as the server counts it: the one sent, fewer (a cut), or none
        meta["prompt_tokens"] = draw(st.one_of(st.integers(0, 4), odd_field))
    for key in SPEC_FIELDS + MEASURE_FIELDS:
        if rare():
            meta[key] = draw(st.one_of(st.integers(0, 6), st.floats(0, 4), odd_field))
    if rare():
        del meta[draw(st.sampled_from(sorted(meta)))]
    answer: dict[str, Any] = {"text": "", "output_ids": list(toks), "meta_info": meta}
    if rare():
        answer["output_ids"] = draw(st.lists(token, max_size=NEW + 1))
    if rare():
        del answer[draw(st.sampled_from(sorted(answer)))]
    return draw(twisted(answer, broken))


# The other fields an answer carries that a verdict, a record or a report uses: counts (speculation's
# verify steps and drafts, prompt and cached tokens) and measures (a latency, a mean accept length),
# drawn well-formed or as a broken server sends them (a boolean, text, a negative, a fraction, NaN).
odd_field = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-2, 6),
    st.floats(),
    st.sampled_from([math.nan, math.inf, 0.5]),
    st.text(max_size=3),
    st.just([1]),
)
SPEC_FIELDS = ("spec_verify_ct", "spec_num_correct_drafts", "spec_num_proposed_drafts")
MEASURE_FIELDS = ("spec_accept_length", "e2e_latency")


odd_token_text = st.sampled_from(
    ["token_id:-5", "token_id:", "token_id:٣", "token_id:1_0", "token_id:+3", "<5>", "token_id:99999999999"]
)


@st.composite
def drawn_completion(draw: st.DrawFn) -> Any:
    """One answer to `/v1/completions` in vLLM's legacy-logprobs shape with `return_token_ids` and
    `return_tokens_as_token_ids` (vllm/entrypoints/openai/protocol.py: CompletionResponse,
    CompletionResponseChoice, CompletionLogProbs; tokens and top-logprob keys written `token_id:N`),
    whole or with some of it missing or broken: its choices (one was asked), counts, finish reasons."""
    if draw(st.integers(0, 19)) == 0:
        return draw(json_value)
    broken = draw(st.booleans())
    rare = lambda: broken and draw(st.integers(0, 5)) == 0  # noqa: E731
    n = draw(st.sampled_from([NEW, NEW, NEW, NEW - 1, 0, NEW + 1])) if rare() else NEW
    toks = [draw(odd_token) if rare() else draw(token) for _ in range(n)]
    lps = [draw(odd_lp) if rare() else draw(finite_lp) for _ in range(n)]
    texts = [draw(odd_token_text) if rare() else f"token_id:{t}" for t in toks]
    tops: list[Any] = []
    for t, lp in zip(toks, lps, strict=True):
        k = draw(st.integers(0, TOP + 1)) if rare() else TOP
        others = draw(
            st.lists(odd_token, max_size=k)
            if rare()
            else st.lists(token, min_size=k, max_size=k, unique=True)
        )
        row = {f"token_id:{o}": draw(odd_lp) if rare() else draw(finite_lp) for o in others}
        if k and not rare():  # greedy: the chosen token is the first alternative
            row = dict(
                list({f"token_id:{t}": lp, **{o: v for o, v in row.items() if o != f"token_id:{t}"}}.items())[
                    :k
                ]
            )
        tops.append(row)
    if rare():
        tops = draw(st.sampled_from([None, tops[:1], [], tops + tops[:1]]))
    finish = "stop" if n < NEW and draw(st.booleans()) else "length"
    if rare():
        finish = draw(st.sampled_from(["length", "stop", "abort", None, "", {"type": "stop"}, math.nan]))
    choice: dict[str, Any] = {
        "index": 0,
        "text": "",
        "logprobs": {
            "text_offset": list(range(n)),
            "token_logprobs": lps,
            "tokens": texts,
            "top_logprobs": tops,
        },
        "finish_reason": finish,
        "stop_reason": None,
        "token_ids": list(toks),
    }
    if rare():
        choice["token_ids"] = draw(st.lists(token, max_size=NEW + 1))
    if rare():
        del choice[draw(st.sampled_from(sorted(choice)))]
    choices: list[Any] = [choice]
    if rare():  # several choices where one was asked (n=1), or none
        second = {**choice, "index": 1}
        choices = draw(st.sampled_from([[choice, second], [second, choice], [choice, choice, second], []]))
    usage: dict[str, Any] = {"prompt_tokens": 3, "total_tokens": 3 + n, "completion_tokens": n}
    if rare():
        usage["completion_tokens"] = draw(st.sampled_from([n + 1, max(n - 1, 0), 0, "4"]))
    if rare():
        usage["prompt_tokens"] = draw(st.one_of(st.integers(0, 4), odd_field))
    if rare():
        usage["prompt_tokens_details"] = {"cached_tokens": draw(st.one_of(st.integers(0, 4), odd_field))}
    answer: dict[str, Any] = {
        "id": "cmpl-x",
        "object": "text_completion",
        "created": 0,
        "model": MODEL,
        "choices": choices,
        "usage": usage,
    }
    if rare():  # speculation as llama.cpp (timings) or SGLang (sglext) reports it
        answer["timings"] = {"draft_n": draw(odd_field), "draft_n_accepted": draw(odd_field)}
    if rare():
        details = {key: draw(st.one_of(st.integers(0, 6), odd_field)) for key in SPEC_FIELDS}
        answer["sglext"] = {"spec_tokens_details": {**details, "spec_accept_length": draw(odd_field)}}
    if rare():
        del answer[draw(st.sampled_from(sorted(answer)))]
    return draw(twisted(answer, broken))


def _number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) and x <= 0


def _token_id(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and 0 <= x <= MAX_ID


def _read(data: bytes) -> tuple[bool, Any]:
    """(read, value) of an answer's bytes by this test's reading of JSON (RFC 8259): names SHOULD be
    unique and readers differ on repeated ones, so an object with a key twice cannot be read one way; a
    number Python cannot hold (more digits than its int() takes) cannot be read; NaN and Infinity are
    read as the non-finite values they stand for (a logprob that is one is not comparable)."""

    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        if len({k for k, _ in pairs}) != len(pairs):
            raise ValueError("a key twice")
        return dict(pairs)

    try:
        return True, json.loads(data, object_pairs_hook=unique, parse_constant=float)
    except (ValueError, RecursionError):
        return False, None


def _count_agrees(count: Any, n: int) -> bool:
    """A count of generated tokens the server sends beside them (SGLang's `completion_tokens`, the
    OpenAI API's `usage.completion_tokens`): none, or the number sent."""
    return count is None or (_count(count) and count == n)


def _count(x: Any) -> bool:
    """A count as a field that a verdict or a report uses must hold it: a whole number >= 0."""
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def _measure(x: Any) -> bool:
    """A latency or a mean accept length: a finite number >= 0."""
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) and x >= 0


def _fields_ok(fields: dict[str, Any], counts: tuple[str, ...], measures: tuple[str, ...]) -> bool:
    """Each of `counts` absent, null or a count; each of `measures` absent, null or a measure."""
    return all(fields.get(k) is None or _count(fields[k]) for k in counts) and all(
        fields.get(k) is None or _measure(fields[k]) for k in measures
    )


def _prompt_counts_ok(sent: Any, prompt_tokens: Any, cached: Any) -> bool:
    """What the server says of the prompt, held to what was sent: the prompt tokens it computed not
    fewer than the ids sent (else it cut the prompt), the cached ones not more than either."""
    if not (prompt_tokens is None or _count(prompt_tokens)) or not (cached is None or _count(cached)):
        return False
    n = len(sent) if isinstance(sent, list) else None
    if n is not None and prompt_tokens is not None and prompt_tokens < n:
        return False
    bounds = [b for b in (n, prompt_tokens) if b is not None]
    return cached is None or not bounds or cached <= min(bounds)


def _positions_ok(toks: list[Any], lps: list[Any], asked: int, stopped: bool) -> bool:
    if not all(map(_token_id, toks)) or not all(map(_number, lps)):
        return False
    return bool(toks) and len(toks) <= asked and (len(toks) == asked or stopped)


def _row_ok(alternatives: list[tuple[Any, Any]], k: int) -> bool:
    """A top-k row: at least k alternatives, each a token id with a finite logprob <= 0, none twice."""
    if len(alternatives) < k or not all(_token_id(t) and _number(v) for t, v in alternatives):
        return False
    return len({t for t, _ in alternatives}) == len(alternatives)


def comparable_native(body: dict[str, Any], answer: Any) -> bool:
    """This test's own judgement of an answer in SGLang's shape: a token id (0 to 2**31-1), a finite
    logprob <= 0 and at least the requested top-k alternatives (finite, <= 0, none twice) at every
    position; as many positions as asked, or fewer after a stop; output_ids, where given, the same ids;
    `completion_tokens`, where a whole number, their count; a finish of type `length` that says its
    length, that count (SGLang's FINISH_LENGTH carries the max_new_tokens reached)."""
    asked, k = body["sampling_params"]["max_new_tokens"], body["top_logprobs_num"]
    meta = answer.get("meta_info") if isinstance(answer, dict) else None
    if not isinstance(meta, dict):
        return False
    entries, tops = meta.get("output_token_logprobs"), meta.get("output_top_logprobs")
    if not isinstance(entries, list) or not isinstance(tops, list) or len(tops) != len(entries):
        return False
    try:
        toks = [e[1] for e in entries]
        lps = [e[0] for e in entries]
    except (TypeError, IndexError, KeyError):
        return False
    if "output_ids" in answer and answer["output_ids"] != toks:
        return False
    finish = meta.get("finish_reason")
    kind = finish.get("type") if isinstance(finish, dict) else finish
    if kind == "length" and isinstance(finish, dict) and not _count_agrees(finish.get("length"), len(toks)):
        return False
    if not _count_agrees(meta.get("completion_tokens"), len(toks)):
        return False
    if not _fields_ok(meta, SPEC_FIELDS, MEASURE_FIELDS):
        return False
    if not _prompt_counts_ok(body.get("input_ids"), meta.get("prompt_tokens"), meta.get("cached_tokens")):
        return False
    if not _positions_ok(toks, lps, asked, kind == "stop"):
        return False
    for row in tops:
        if not isinstance(row, list):
            return False
        try:
            alternatives = [(e[1], e[0]) for e in row]
        except (TypeError, IndexError, KeyError):
            return False
        if not _row_ok(alternatives, k):
            return False
    return True


def _id_text(text: Any) -> int | None:
    """vLLM's `token_id:N` (N in ASCII digits, as it writes them), else None."""
    if isinstance(text, str) and text.startswith("token_id:") and text[9:].isascii() and text[9:].isdigit():
        return int(text[9:])
    return None


def comparable_completion(body: dict[str, Any], answer: Any) -> bool:
    """This test's own judgement of an answer in vLLM's legacy-logprobs shape: exactly one choice (one
    was asked: the OpenAI API's `n` is 1 unless given); at every position a token named by its id
    (`token_id:N`, no vocabulary is given to map text), a finite logprob <= 0 and at least the
    requested alternatives; `token_ids`, where given, the same ids; as many positions as asked, or fewer
    with finish_reason "stop"; `usage.completion_tokens`, where a whole number, their count."""
    asked, k = body["max_tokens"], body.get("logprobs") or 0
    choices = answer.get("choices") if isinstance(answer, dict) else None
    if not isinstance(choices, list) or len(choices) != 1 or not isinstance(choices[0], dict):
        return False
    choice = choices[0]
    logprobs = choice.get("logprobs")
    if not isinstance(logprobs, dict):
        return False
    lps, texts, tops = (logprobs.get(key) for key in ("token_logprobs", "tokens", "top_logprobs"))
    if not all(isinstance(x, list) for x in (lps, texts, tops)) or not len(lps) == len(texts) == len(tops):
        return False
    toks = [_id_text(t) for t in texts]
    if "token_ids" in choice and choice["token_ids"] != toks:
        return False
    usage = answer.get("usage")
    if usage is not None and not isinstance(usage, dict):
        return False
    if isinstance(usage, dict):
        details = usage.get("prompt_tokens_details")
        if not _count_agrees(usage.get("completion_tokens"), len(toks)):
            return False
        if (
            not _fields_ok(usage, ("prompt_tokens", "total_tokens"), ())
            or details is not None
            and not isinstance(details, dict)
        ):
            return False
        cached = details.get("cached_tokens") if isinstance(details, dict) else None
        if not _prompt_counts_ok(body.get("prompt"), usage.get("prompt_tokens"), cached):
            return False
    timings = answer.get("timings")
    if isinstance(timings, dict) and "draft_n" in timings:
        if not _fields_ok(timings, ("draft_n", "draft_n_accepted"), ()):
            return False
    sglext = answer.get("sglext")
    details = sglext.get("spec_tokens_details") if isinstance(sglext, dict) else None
    if isinstance(details, dict) and not _fields_ok(details, SPEC_FIELDS, ("spec_accept_length",)):
        return False
    if not _positions_ok(toks, lps, asked, choice.get("finish_reason") == "stop"):
        return False
    for row in tops:
        if not isinstance(row, dict) or not _row_ok([(_id_text(t), v) for t, v in row.items()], k):
            return False
    return True


def comparable(body: dict[str, Any], data: bytes) -> bool:
    """Whether the answer sent as `data` to the request `body` could be compared in full."""
    read, answer = _read(data)
    if not read:
        return False
    return comparable_completion(body, answer) if "max_tokens" in body else comparable_native(body, answer)


VERBS = ("parity", "repeat", "record-check", "warm")
MODEL = "Qwen/Qwen3.8-27B"  # the model FakeServer serves, under its path as SGLang does


def _asked(body: dict[str, Any]) -> int:
    return body["max_tokens"] if "max_tokens" in body else body["sampling_params"]["max_new_tokens"]


def _as_asked(body: dict[str, Any]) -> dict[str, Any]:
    """A request as the test judges its answer: `warm`'s fills (one new token, never compared) as if
    they asked what every compared request asks, so that a whole drawn answer counts as whole."""
    if "max_tokens" in body:
        return {**body, "max_tokens": NEW}
    params = body["sampling_params"]
    return {**body, "sampling_params": {**params, "max_new_tokens": NEW}}


def _own_count(data: bytes) -> bool:
    """A drawn answer that holds its own count of cached prompt tokens (a warm pass may refuse it)."""
    answer = _read(data)[1]
    meta = answer.get("meta_info") if isinstance(answer, dict) else None
    return isinstance(meta, dict) and "cached_tokens" in meta


@st.composite
def answers_case(draw: st.DrawFn) -> tuple[str, str, list[Any], list[Any] | None]:
    """(verb, API, the first run's answers, the second's or None for the same again). `warm` reads the
    native API's counts of cached tokens, so it runs there only."""
    verb = draw(st.sampled_from(VERBS))
    api = "native" if verb == "warm" else draw(st.sampled_from(["native", "native", "openai"]))
    answer = drawn_answer() if api == "native" else drawn_completion()
    first = draw(st.lists(answer, min_size=1, max_size=4))
    second = draw(st.one_of(st.none(), st.lists(answer, min_size=1, max_size=4)))
    return verb, api, first, second


@fuzz(examples=400)
@given(case=answers_case())
def test_equal_only_when_every_position_was_compared(scripted, case):
    """`second`: the answers after the first run's (None: the same again, so that equal verdicts come)."""
    verb, api, first, second = case
    engine = f"sglang+{scripted.url}" if api == "native" else f"openai+{scripted.url}/v1?model={MODEL}"
    script = first + (second if second is not None else first)
    with scratch() as root:
        (root / "p.jsonl").write_text(PROMPTS)
        common = ["--prompts", "p.jsonl", *SETTINGS]
        scripted.play(first if verb == "repeat" and second is None else script)
        if verb == "warm":  # per prompt: a flush, the cold answer, a fill (not compared), the warm one
            code, out, err = cli(["warm", engine, *common, "--out", "o"], root)
        elif verb == "parity":
            code, out, err = cli(
                ["parity", engine, engine, "--allow-same-engine", *common, "--out", "o"], root
            )
        elif verb == "repeat":
            code, out, err = cli(["repeat", engine, "-n", "2", "-b", "1", *common, "--out", "o"], root)
        else:
            key = ["--recipe-name", "r", "--card", "h200", "--golden", "g.json", "--out", "o"]
            code, out, err = cli(["golden", "record", engine, *common, *key], root)
            sound(code, err)
            if code == 0:
                code, out, err = cli(["golden", "check", engine, *key], root)
        sound(code, err)
        sent = list(scripted.sent)
        fill = [_asked(body) == 1 for body, _ in sent]  # warm's fills
        every = all(comparable(body, data) for (body, data), f in zip(sent, fill, strict=True) if not f)
        event(f"{verb} ({api}): every answer comparable" if every else f"{verb} ({api}): some answer not")
        event(f"{verb} ({api}): exit {code}")
        if code in (0, 1):  # a verdict, EQUAL or not, only on answers compared in full
            assert every, f"exit {code} ({out.strip()}) after answers that cannot be compared in full: {sent}"
        if code == 0:
            assert "EQUAL" in out or "REPEATABLE" in out
        whole = all(comparable(_as_asked(body), data) for body, data in sent)
        if whole and sent and not (verb == "warm" and any(_own_count(d) for _, d in sent)):
            assert code in (0, 1), f"complete answers refused (exit {code}):\n{err}\n{sent}"


# --- one field of a whole answer ------------------------------------------------------------------
# Every field of an answer that a verdict, a record or a report uses is read strictly, and every
# self-report is held to what was sent: a whole answer with exactly one such field drawn (well-formed,
# broken, or contradicting the request) ends in a verdict exactly when this file's own judgement
# (`comparable`) finds the field sound, and otherwise in a refusal (exit 2) that names the field and the
# server. Where the server lists more alternatives than asked, only those asked are compared.

# (a finish reason of any kind beside a whole answer is no reason to refuse it, and is never stored as it
# came: a NaN there once ended in an internal error at the results writer)
NATIVE_FIELDS = (
    *SPEC_FIELDS,
    *MEASURE_FIELDS,
    "prompt_tokens",
    "cached_tokens",
    "completion_tokens",
    "finish_reason",
)
OPENAI_FIELDS = (
    ("usage", "prompt_tokens"),
    ("usage", "completion_tokens"),
    ("usage", "prompt_tokens_details", "cached_tokens"),
    ("timings", "draft_n"),
    ("timings", "draft_n_accepted"),
    ("sglext", "spec_tokens_details", "spec_verify_ct"),
    ("sglext", "spec_tokens_details", "spec_accept_length"),
)


@st.composite
def whole_native(draw: st.DrawFn, extra: int = 0) -> dict[str, Any]:
    """An answer to `/generate` that can be compared in full, with `extra` alternatives beyond the top-k
    asked at every position (each below the row's lowest, so the k asked stay the same)."""
    toks = draw(st.lists(token, min_size=NEW, max_size=NEW))
    lps = [draw(finite_lp) for _ in toks]
    tops = []
    for t, lp in zip(toks, lps, strict=True):
        others = draw(
            st.lists(
                token.filter(lambda o, t=t: o != t),
                min_size=TOP - 1 + extra,
                max_size=TOP - 1 + extra,
                unique=True,
            )
        )
        values = sorted((draw(st.floats(-60, lp, allow_nan=False)) for _ in others), reverse=True)
        tops.append(
            [
                [lp, t, None],
                *(
                    [v - 1.0 * (i >= TOP - 1), o, None]
                    for i, (v, o) in enumerate(zip(values, others, strict=True))
                ),
            ]
        )
    meta = {
        "id": "x",
        "finish_reason": {"type": "length", "length": NEW},
        "completion_tokens": NEW,
        "output_token_logprobs": [[lp, t, None] for lp, t in zip(lps, toks, strict=True)],
        "output_top_logprobs": tops,
    }
    return {"text": "", "output_ids": toks, "meta_info": meta}


def _as_completion(native: dict[str, Any]) -> dict[str, Any]:
    """The same answer in vLLM's legacy-logprobs shape (tokens and keys written `token_id:N`)."""
    meta = native["meta_info"]
    toks = native["output_ids"]
    rows = [{f"token_id:{t}": v for v, t, _ in row} for row in meta["output_top_logprobs"]]
    choice = {
        "index": 0,
        "text": "",
        "logprobs": {
            "text_offset": list(range(NEW)),
            "token_logprobs": [e[0] for e in meta["output_token_logprobs"]],
            "tokens": [f"token_id:{t}" for t in toks],
            "top_logprobs": rows,
        },
        "finish_reason": "length",
        "token_ids": toks,
    }
    usage = {"prompt_tokens": 3, "total_tokens": 3 + NEW, "completion_tokens": NEW}
    return {"id": "c", "object": "text_completion", "model": MODEL, "choices": [choice], "usage": usage}


def _put(answer: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for key in path[:-1]:
        answer = answer.setdefault(key, {})
    answer[path[-1]] = value


# Values as a broken server sends them where a count or a measure belongs, each drawn for every field.
ODD_VALUES = [None, True, False, -1, 2.5, math.nan, math.inf, -math.inf, "5", "", [1], {"n": 1}]
field_value = st.one_of(st.sampled_from(ODD_VALUES), st.integers(0, 6), st.floats(0, 4), odd_field)
FIELDS = [("native", ("meta_info", f)) for f in NATIVE_FIELDS] + [("openai", p) for p in OPENAI_FIELDS]


@pytest.mark.parametrize(("api", "path"), FIELDS, ids=lambda x: x if isinstance(x, str) else ".".join(x))
@fuzz(examples=40)
@given(answer=whole_native(), value=field_value)
def test_every_answer_field_is_read_strictly_and_held_to_the_request(scripted, api, path, answer, value):
    """One field of a whole answer drawn (`path` in the API's shape): a verdict exactly when this file's
    own reading finds it sound, else a refusal naming the field and the server."""
    field = path[-1]
    if api == "openai":
        answer = _as_completion(answer)
    _put(answer, path, value)
    engine = f"sglang+{scripted.url}" if api == "native" else f"openai+{scripted.url}/v1?model={MODEL}"
    with scratch() as root:
        (root / "p.jsonl").write_text(PROMPTS)
        scripted.play([answer])
        argv = ["parity", engine, engine, "--allow-same-engine", "--prompts", "p.jsonl", *SETTINGS]
        code, _, err = cli([*argv, "--out", "o"], root)
        sound(code, err)
        whole = all(comparable(body, data) for body, data in scripted.sent)
    event(f"{'sound' if whole else 'refused'}")
    if whole:
        assert code == 0, f"a sound {field} ({value!r}) refused (exit {code}):\n{err}"
    else:
        assert code == 2, f"exit {code} after a {field} that is not sound: {scripted.sent}"
        assert scripted.url in err and (field in err or "prompt tokens" in err), err


@fuzz(examples=100)
@given(api=st.sampled_from(["native", "openai"]), extra=st.integers(1, 3), data=st.data())
def test_alternatives_beyond_those_asked_are_not_compared(scripted, api, extra, data):
    """A server that lists more alternatives than the top-k asked (on one side only) and the same
    answer with exactly those asked: EQUAL, since only what was asked is compared."""
    longer = data.draw(whole_native(extra))
    asked = json.loads(json.dumps(longer))
    asked["meta_info"]["output_top_logprobs"] = [
        row[:TOP] for row in longer["meta_info"]["output_top_logprobs"]
    ]
    if api == "openai":
        longer, asked = _as_completion(longer), _as_completion(asked)
    engine = f"sglang+{scripted.url}" if api == "native" else f"openai+{scripted.url}/v1?model={MODEL}"
    with scratch() as root:
        (root / "p.jsonl").write_text(PROMPTS)
        scripted.play([longer, longer, asked, asked])  # side A's two prompts, then side B's
        argv = ["parity", engine, engine, "--allow-same-engine", "--prompts", "p.jsonl", *SETTINGS]
        code, out, err = cli([*argv, "--out", "o"], root)
    sound(code, err)
    assert code == 0 and "EQUAL" in out, err


@pytest.fixture(scope="module")
def tiny_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from bx_tiny_tokenizer import make_tokenizer

    return make_tokenizer(tmp_path_factory.mktemp("tokenizer") / "tok")


@fuzz(examples=60)
@given(data=st.data())
def test_a_token_id_the_given_tokenizer_has_no_entry_for_is_refused(scripted, tiny_tokenizer, data):
    """With --tokenizer (a real transformers tokenizer of 384 ids), an answer whose chosen token is no
    id of it is refused, naming the id and the tokenizer; answers of its ids alone come to a verdict."""
    from bx_tiny_models import VOCAB

    answers = data.draw(st.lists(whole_native(), min_size=1, max_size=2))
    with scratch() as root:
        (root / "p.jsonl").write_text(PROMPTS)
        scripted.play(answers)
        argv = ["parity", f"sglang+{scripted.url}", f"sglang+{scripted.url}", "--allow-same-engine"]
        argv += ["--prompts", "p.jsonl", "--tokenizer", str(tiny_tokenizer), *SETTINGS, "--out", "o"]
        code, _, err = cli(argv, root)
    sound(code, err)
    outside = any(t >= VOCAB for a in answers for t in a["output_ids"])
    event(f"an id outside the tokenizer: {outside}")
    assert code == (2 if outside else 0), err
    if outside:
        assert "is not in the vocabulary of --tokenizer (384 entries)" in err, err


# --- command lines ----------------------------------------------------------------------------------

OPTIONS = [
    "--prompts", "--long", "--limit", "--tokenizer", "--vocab-size", "--seed", "--max-new-tokens",
    "--top-logprobs", "--out", "--json", "--force", "--repeats", "-n", "--batch", "-b", "--preset",
    "--recipe", "--spec-a", "--inflight-a", "--name", "--allow-same-engine", "--card", "--recipe-name",
    "--variant", "--golden-dir", "--golden", "--history", "--no-history", "--inflight", "--new-card",
    "--lengths", "--new-tokens", "--warmup", "--runs", "--diff", "--max-new", "--rep", "--build-info",
    "--warm-passes", "--shared-prefix", "--spec", "--warm-pass", "--min-prompt-tokens",
]  # fmt: skip
FLAGS = {"--json", "--force", "--allow-same-engine", "--no-history", "--new-card"}
value = st.one_of(
    st.sampled_from(
        [
            "1",
            "2",
            "0",
            "-1",
            "3",
            "1e20",
            "inf",
            "nan",
            "1.5",
            "16k",
            "100000000000000000000",
            "bytes",
            "bytes:-1000",
            "bytes:3",
            "../x",
            "h200",
            "r",
            "p.jsonl",
            "g",
            "g/h200/r.json",
            "o",
            "x/../..",
            "recipe",
            "no-spec",
            "must",
            "B1",
            "",
            " ",
            "\r",
            "٣",
        ]  # fmt: skip
    ),
    st.text(max_size=6),
)


def bases(url: str, radix: str) -> list[list[str]]:
    """One command that runs to a verdict per verb (the golden dir holds golden `r` of card h200);
    `warm` against `radix`, a server with a prefix cache, alone and against the golden."""
    engine, common = f"sglang+{url}", ["--prompts", "p.jsonl", *SETTINGS]
    key = ["--card", "h200", "--golden-dir", "g"]
    return [
        ["parity", engine, f"{engine}?timeout=30", "--allow-same-engine", *common],
        ["repeat", engine, "-n", "2", "-b", "1", *common],
        ["golden", "record", engine, "--recipe-name", "r2", *key, *common],
        ["golden", "check", engine, "--recipe-name", "r", *key],
        ["bench", engine, "--lengths", "8", "--vocab-size", "50", "--new-tokens", "4", "--warmup", "0"],
        ["history", "h200", "--golden-dir", "g"],
        ["warm", f"sglang+{radix}", "--warm-passes", "2", "--inflight", "2", *common],
        ["warm", f"sglang+{radix}", "--recipe-name", "r", *key],
    ]


@st.composite
def command_line(draw: st.DrawFn, url: str, radix: str) -> list[str]:
    """A command that runs, with up to four edits: an option added (any value), a value replaced, a word
    dropped, an option given twice, an option abbreviated, the engine replaced."""
    argv = list(draw(st.sampled_from(bases(url, radix))))
    if draw(st.booleans()):
        argv += ["--out", "o"]
    port = url.rsplit(":", 1)[1]
    engines = [f"sglang+{url}?retries=0", f"sglang+{url}?timeout=inf", "sglang+http://127.0.0.1", "x",
               "openai+http://127.0.0.1:9/v1?retries=0", "hf:/nonexistent",
               f"sglang+http://localhost:{port}"]  # fmt: skip
    for _ in range(draw(st.integers(0, 4))):
        edit = draw(st.integers(0, 5))
        at = draw(st.integers(0, len(argv) - 1))
        if edit == 0:
            option = draw(st.sampled_from(OPTIONS))
            argv += [option] if option in FLAGS else [option, draw(value)]
        elif edit == 1 and argv[at].startswith("-") and at + 1 < len(argv):
            argv[at + 1] = draw(value)
        elif edit == 2 and len(argv) > 1:
            del argv[at]
        elif edit == 3 and argv[at].startswith("-") and at + 1 < len(argv):
            argv += [argv[at], argv[at + 1]]
        elif edit == 4 and argv[at].startswith("--") and len(argv[at]) > 4:
            argv[at] = argv[at][: draw(st.integers(3, len(argv[at]) - 1))]
        elif edit == 5 and len(argv) > 2 and "+" in argv[2 if argv[0] == "golden" else 1]:
            argv[2 if argv[0] == "golden" else 1] = draw(st.sampled_from(engines))
    return argv


@fuzz(examples=400)
@given(data=st.data())
def test_any_command_line_ends_in_a_verdict_or_a_clear_refusal(canned, radix, golden_bytes, data):
    argv = data.draw(command_line(canned.url, radix.url))
    with scratch() as root:
        (root / "p.jsonl").write_text(PROMPTS)
        (root / "g" / "h200").mkdir(parents=True)
        (root / "g" / "h200" / "r.json").write_bytes(golden_bytes)
        (root / "g" / "h200" / "history.jsonl").write_text(json.dumps(HISTORY) + "\n")
        outs = [root / argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--out"] + [root / "bitexact-out"]
        before = tree(root, outs)
        code, _, err = cli(argv, root)
        sound(code, err)
        verbs = ("parity", "repeat", "golden", "bench", "history", "warm")
        event(f"{argv[0] if argv and argv[0] in verbs else 'no verb'}: exit {code}")
        after = tree(root, outs)
        for name in sorted(set(before) | set(after)):
            if before.get(name) != after.get(name):
                assert allowed_change(root / name, before.get(name) is not None, argv), (
                    f"{name} changed outside --out: {argv}\n{err}"
                )
        shutil.rmtree(root / "bitexact-out", ignore_errors=True)


def _kind_of_lines(path: Path) -> set[Any]:
    """The `kind` of a JSON file, or of each line of a JSON Lines file."""
    try:
        text = path.read_text()
    except (OSError, ValueError):
        return {None}
    try:
        whole = json.loads(text)
        return {whole.get("kind") if isinstance(whole, dict) else None}
    except ValueError:
        pass
    try:
        return {json.loads(line).get("kind") for line in text.split("\n") if line.strip()}
    except (ValueError, AttributeError):
        return {None}


def allowed_change(path: Path, existed: bool, argv: list[str]) -> bool:
    """What a command may change outside --out: a history it appends to (or starts), and for
    `golden record` a new golden, or with --force a golden replaced by another."""
    if not path.exists():
        return False  # nothing is ever deleted
    if _kind_of_lines(path) == {"bitexact-history"}:
        return argv[0] == "golden" and (
            not existed or path.read_bytes().startswith((json.dumps(HISTORY) + "\n").encode())
        )
    if argv[:2] == ["golden", "record"] and _kind_of_lines(path) == {"bitexact-golden"}:
        return not existed or "--force" in argv
    return False
