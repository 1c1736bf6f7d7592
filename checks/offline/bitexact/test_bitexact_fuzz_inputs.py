"""The fuzzer's drawn inputs: prompt files, edited goldens and history lines (what must hold for
every draw: bx_fuzz_run.py)."""

from __future__ import annotations

import json
from typing import Any

from checkhelpers.bx_fuzz_run import (
    HISTORY,
    MAX_ID,
    SETTINGS,
    cli,
    json_paths,
    json_scalar,
    json_value,
    scratch,
    sound,
)
from checkhelpers.fuzz_settings import fuzz
from hypothesis import given
from hypothesis import strategies as st

# --- prompt files -------------------------------------------------------------------------------------

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


@st.composite
def edited_golden(draw: st.DrawFn, original: bytes) -> bytes:
    """The golden with one to three edits: a value replaced, a key or item dropped, or bytes cut."""
    if draw(st.integers(0, 9)) == 0:
        cut = draw(st.integers(0, len(original) - 1))
        return original[:cut] + draw(st.binary(max_size=4))
    record = json.loads(original)
    for _ in range(draw(st.integers(1, 3))):
        paths = json_paths(record)[1:]
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


@st.composite
def history_line(draw: st.DrawFn) -> str:
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return draw(st.text(max_size=20))
    line = json.loads(json.dumps(HISTORY))
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.sampled_from(json_paths(line)[1:]))
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
