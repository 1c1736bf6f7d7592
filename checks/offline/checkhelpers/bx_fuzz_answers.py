"""What the answers fuzzer draws (answers in SGLang's native and OpenAI shapes, whole or broken) and
this file's own reading of them (`comparable`): an answer is comparable exactly when every position
holds a token id, a finite logprob <= 0 and the requested top-k alternatives, and every field a verdict
uses is sound, judged from the raw answer, not by bitexact's code."""

from __future__ import annotations

import json
import math
from typing import Any

from hypothesis import strategies as st

from checkhelpers.bx_fuzz_run import MAX_ID, NEW, TOP, json_paths, json_value
from checkhelpers.bx_fuzz_servers import Digits, Twice

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
        at = draw(st.sampled_from(json_paths(answer)[1:]))
        _at(answer, at[:-1])[at[-1]] = Digits(draw(long_number))
    if draw(st.integers(0, 5)) == 0:
        objects = [p for p in json_paths(answer) if isinstance(_at(answer, p), dict) and _at(answer, p)]
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
