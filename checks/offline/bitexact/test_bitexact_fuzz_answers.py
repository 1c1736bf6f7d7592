"""The fuzzer's drawn server answers: EQUAL and REPEATABLE only when every position was compared, every
answer field read strictly and held to the request (what must hold for every draw: bx_fuzz_run.py; the
draws and their judgement: bx_fuzz_answers.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from checkhelpers.bx_fuzz_answers import (
    MEASURE_FIELDS,
    MODEL,
    SPEC_FIELDS,
    _as_asked,
    _asked,
    _own_count,
    answers_case,
    comparable,
    finite_lp,
    odd_field,
    token,
)
from checkhelpers.bx_fuzz_run import NEW, PROMPTS, SETTINGS, TOP, cli, scratch, sound
from checkhelpers.fuzz_settings import fuzz
from hypothesis import event, given
from hypothesis import strategies as st


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
    from checkhelpers.bx_tiny_tokenizer import make_tokenizer

    return make_tokenizer(tmp_path_factory.mktemp("tokenizer") / "tok")


@fuzz(examples=60)
@given(data=st.data())
def test_a_token_id_the_given_tokenizer_has_no_entry_for_is_refused(scripted, tiny_tokenizer, data):
    """With --tokenizer (a real transformers tokenizer of 384 ids), an answer whose chosen token is no
    id of it is refused, naming the id and the tokenizer; answers of its ids alone come to a verdict."""
    from checkhelpers.bx_tiny_models import VOCAB

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
