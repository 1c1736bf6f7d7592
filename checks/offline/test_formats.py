"""The file reader and schema check that bitexact, the launcher and pinlock share (pkgs/formats,
exactformats), through each program's own entry points:

- every kind of file that is not a regular file (a FIFO, a directory, a device, a socket, a dangling
  link, a link loop, a link to a FIFO) is refused by all three programs, run as real processes,
  within seconds and naming the kind; a FIFO never blocks the open;
- drawn bytes (a byte-order mark or not, UTF-8 or not, UTF-16) read the same in the three: a BOM is taken
  off everywhere, bad UTF-8 is named with its byte;
- a drawn `schema` (whole numbers below, at and above what the programs read, decimals, booleans, strings,
  null, lists) is accepted by all three exactly when it is the whole number they read, and otherwise
  refused by each with the same words: newer (upgrade), older, or malformed (the number to write);
- a golden reformatted by a JSON formatter (integral logprobs written as integers, indentation, key order,
  a BOM) is never called corrupted: it loads, or is named a reformat whose values are equal when parsed,
  with the fix; a real edit is still an edit;
- a history line of a newer schema is named as such, not as "not a history line".

Settings of the drawn properties: fuzz_settings.py."""

from __future__ import annotations

import json
import math
import os
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import exactformats
import pytest
from bitexact import golden as bx_golden
from bitexact import history as bx_history
from bitexact import presets as bx_presets
from bitexact.errors import BitexactError
from bitexact.generation import Generation
from bitexact.prompts import parse_prompt
from checkhelpers.fuzz_settings import fuzz
from exactlaunch import recipe as ln_recipe
from hypothesis import given
from hypothesis import strategies as st
from pinlock import recipe as pl_recipe
from pinlock.pins import PinError
from pinlock.pins import UsageError as PinUsage

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "nix" / "recipes" / "qwen3.8-27b-exact.json"
RECIPE_TEXT = RECIPE.read_text()
PROJECTS = ("pkgs/formats", "pkgs/bitexact", "pkgs/gpuhost", "pkgs/server", "pkgs/lock")

# --- the three programs, each reading a recipe -----------------------------------------------------------


def _bitexact(path: Path) -> None:
    bx_presets.load_recipe(str(path))


def _launcher(path: Path) -> None:
    ln_recipe.load_recipe(path)


def _pinlock(path: Path) -> None:
    pl_recipe.read(path)


READERS: dict[str, Callable[[Path], None]] = {
    "bitexact": _bitexact,
    "launcher": _launcher,
    "pinlock": _pinlock,
}
NAMES = {"bitexact": "bitexact", "launcher": "bitexact-server", "pinlock": "pinlock"}
ERRORS = (BitexactError, ln_recipe.RecipeError, PinUsage, PinError)


def refusal(program: str, path: Path) -> str | None:
    """The program's message for the recipe at `path`, or None when it reads it."""
    try:
        READERS[program](path)
    except ERRORS as error:
        return str(error)
    return None


def argv(program: str, recipe: Path, root: Path) -> list[str]:
    """A command line of `program` that reads `recipe` first (no server, no network)."""
    url = "sglang+http://127.0.0.1:9"
    return {
        "bitexact": ["-m", "bitexact", "parity", url, url, "--preset", "recipe", "--recipe", str(recipe)],
        "launcher": ["-m", "exactlaunch.cli", "--recipe", str(recipe), "--print"],
        "pinlock": ["-m", "pinlock.cli", "--root", str(root), "--recipe", str(recipe), "status"],
    }[program]


# --- file kinds, as real processes ---------------------------------------------------------------------


@contextmanager
def special(kind: str, tmp: Path) -> Iterator[tuple[Path, str]]:
    """A path of `kind` and a pattern of the words every program must use for it."""
    path = tmp / "recipe.json"
    if kind == "fifo":
        os.mkfifo(path)
        yield path, r"is a named pipe \(FIFO\)"
    elif kind == "link-to-fifo":
        os.mkfifo(tmp / "pipe")
        path.symlink_to(tmp / "pipe")
        yield path, r"is a named pipe \(FIFO\)"
    elif kind == "directory":
        path.mkdir()
        yield path, "is a directory"
    elif kind == "device":
        yield Path("/dev/null"), "is a character device"
    elif kind == "socket":
        with socket.socket(socket.AF_UNIX) as sock:
            sock.bind(str(path))
            yield path, "is a socket"
    elif kind == "loop":
        path.symlink_to(path)
        yield path, "is a symbolic link loop"
    elif kind == "dangling":
        path.symlink_to(tmp / "gone.json")
        yield path, "is a symbolic link to .*gone.json, which does not exist"
    else:
        raise AssertionError(kind)


KINDS = ("fifo", "link-to-fifo", "directory", "device", "socket", "dangling", "loop")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("program", sorted(READERS))
def test_a_recipe_that_is_no_regular_file_is_refused_at_once_by_every_program(
    program: str, kind: str, tmp_path: Path
) -> None:
    """The real program, as a process: exit 2 within seconds (a FIFO without a writer would block an
    open(2) forever), the path and its kind named, and the fix."""
    import re

    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    with special(kind, tmp_path) as (path, words):
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, *argv(program, path, tmp_path)],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
        took = time.monotonic() - started
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert re.search(re.escape(str(path)) + ".*" + words, done.stderr), done.stderr
    assert "give" in done.stderr and "recipe" in done.stderr, done.stderr
    assert took < 30, f"{program} took {took:.1f}s"


def test_a_fifo_that_turns_into_one_after_the_stat_is_still_not_read(tmp_path: Path) -> None:
    """The kind is checked again on the descriptor, opened without blocking: a FIFO put in the place of
    a regular file between the check and the open is refused too, not waited on."""
    path = tmp_path / "x.json"
    path.write_text("{}")
    real_stat = os.stat

    def swap(target: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        result = real_stat(target, *args, **kwargs)
        if Path(target) == path and stat.S_ISREG(result.st_mode):
            path.unlink()
            os.mkfifo(path)
        return result

    os.stat = swap  # type: ignore[assignment]
    try:
        with pytest.raises(exactformats.FormatError, match="named pipe"):
            exactformats.read_text(path, "recipe", "a recipe")
    finally:
        os.stat = real_stat  # type: ignore[assignment]


# --- bytes: a BOM, UTF-8 or not -------------------------------------------------------------------------

recipe_bytes = st.tuples(
    st.sampled_from([b"", exactformats.BOM, b"\xff\xfe"]),
    st.sampled_from(["plain", "latin-1 byte", "utf-16"]),
)


@fuzz(30)
@given(recipe_bytes)
def test_drawn_bytes_read_the_same_in_every_program(draw: tuple[bytes, str]) -> None:
    """A BOM before a valid recipe is taken off by all three; bad UTF-8 is refused by all three, naming
    the byte and the encoding to save it in."""
    prefix, body = draw
    text = RECIPE_TEXT
    data = {
        "plain": text.encode(),
        "latin-1 byte": text.replace('"name"', '"n\u00e4me"', 1).encode("latin-1", errors="replace"),
        "utf-16": text.encode("utf-16-le"),
    }[body]
    with tempfile.TemporaryDirectory() as temp:
        path = Path(temp) / "r.json"
        path.write_bytes(prefix + data)
        got = {program: refusal(program, path) for program in READERS}
    valid = prefix in (b"", exactformats.BOM) and body == "plain"
    if valid:
        assert got == dict.fromkeys(READERS), got
        return
    for program, message in got.items():
        assert message is not None, program
        assert "not UTF-8 text (byte " in message and "saved as UTF-8" in message, (program, message)
        if b"\xff\xfe" in prefix or body == "utf-16":
            assert "UTF-16" in message, message


# --- schema numbers ---------------------------------------------------------------------------------------

schemas = st.one_of(
    st.integers(-3, 5),
    st.integers(min_value=6),
    st.floats(allow_nan=False, allow_infinity=False, min_value=-2, max_value=4),
    st.sampled_from([1.0, 2.0, 0.0, True, False, None, "1", " 1", "2", "one", [1], {"v": 1}]),
    st.text(max_size=4),
)


def recipe_with_schema(value: Any) -> str:
    data = json.loads(RECIPE_TEXT)
    if value is None:
        del data["schema"]
    else:
        data["schema"] = value
    return json.dumps(data)


@fuzz(60)
@given(schemas)
def test_a_drawn_schema_gets_the_same_verdict_and_words_from_every_program(value: Any) -> None:
    with tempfile.TemporaryDirectory() as temp:
        path = Path(temp) / "r.json"
        path.write_text(recipe_with_schema(value))
        got = {program: refusal(program, path) for program in READERS}
    if type(value) is int and value == 1:
        assert got == dict.fromkeys(READERS), got
        return
    # the same classification, with each program's name and its own fix for an older schema
    for program, message in got.items():
        assert message is not None, f"{program} took schema {value!r}"
        name = NAMES[program]
        if type(value) is int and value > 1:
            assert f"has schema {value}: it was written by a newer {name}" in message, message
            assert f"upgrade {name}" in message, message
        elif type(value) is int:
            assert f"has schema {value}, older than this {name} reads (schema 1)" in message, message
            assert "flake the recipe came with" in message, message
        elif isinstance(value, bool):
            assert "a boolean, not a schema number" in message and 'write "schema": 1' in message, message
        elif isinstance(value, float) and value == 1.0:
            assert 'is 1.0, a decimal; a schema is a whole number: write "schema": 1' in message, message
        elif isinstance(value, float):
            assert "not a whole number" in message, message
        elif isinstance(value, str) and value.strip() == "1":
            assert 'write "schema": 1 (without quotes)' in message, message
        elif isinstance(value, str):
            assert "`schema` is the string" in message, message
        elif value is None:
            assert "has no `schema`" in message, message
        else:
            assert "not a schema number" in message, message
    # apart from the program's name and the way it names the file, the words are the same
    shared = {
        program: message.replace(NAMES[program], "PROGRAM").split(" ", 2)[-1]
        for program, message in got.items()
        if message is not None
    }
    older = {m.split("; ")[0] for m in shared.values()}
    assert len(older) == 1, shared


# --- goldens: a reformat is not corruption ------------------------------------------------------------------


def golden_record(logprobs: list[float]) -> dict[str, Any]:
    """A golden of one prompt whose chosen tokens are their rows' top entries."""
    ids = [5 + i for i in range(len(logprobs))]
    rows = [[(t, lp), (t + 100, lp - 1.5)] for t, lp in zip(ids, logprobs, strict=True)]
    gen = Generation(prompt_id="p0", token_ids=ids, logprobs=logprobs, top_logprobs=rows)
    prompt = parse_prompt({"id": "p0", "input_ids": [1, 2, 3]}, "test")
    return bx_golden.build_record(
        card="test-card",
        recipe="r",
        variant="recipe",
        settings={"max_new_tokens": len(ids), "top_logprobs": 2},
        metadata={"build": "test"},
        prompts=[prompt],
        generations=[gen],
    )


def jq_like(value: Any, integral_as_int: bool) -> Any:
    """What a JSON formatter that keeps every number's value writes: an integral float as an integer."""
    if isinstance(value, dict):
        return {k: jq_like(v, integral_as_int) for k, v in reversed(list(value.items()))}
    if isinstance(value, list):
        return [jq_like(v, integral_as_int) for v in value]
    if integral_as_int and isinstance(value, float) and value.is_integer():
        return int(value)
    return value


logprob_lists = st.lists(
    st.one_of(st.sampled_from([-0.0, 0.0, -1.0, -3.0, -12.0]), st.floats(-20, 0, allow_nan=False)),
    min_size=1,
    max_size=4,
)


@fuzz(40)
@given(logprob_lists, st.booleans(), st.booleans(), st.sampled_from([None, 1, 4]))
def test_a_reformatted_golden_is_never_called_corrupted(
    logprobs: list[float], integral_as_int: bool, bom: bool, indent: int | None
) -> None:
    record = golden_record(logprobs)
    with tempfile.TemporaryDirectory() as temp:
        path = Path(temp) / "g.json"
        text = json.dumps(jq_like(record, integral_as_int), indent=indent)
        path.write_bytes((exactformats.BOM if bom else b"") + text.encode())
        try:
            bx_golden.load_golden(path, card="test-card", recipe="r")
            message = None
        except BitexactError as error:
            message = str(error)
    rewritten = integral_as_int and any(float(x).is_integer() for x in logprobs)
    if not rewritten:  # indentation, key order and a BOM change no value and no digest
        assert message is None, message
        return
    assert message is not None
    zeros = {math.copysign(1, x) for x in logprobs if x == 0}
    if len(zeros) == 2:  # 0.0 and -0.0 both read back as the integer 0: which was which is lost
        assert "do not match their digests" in message and "without its exact form" in message, message
        return
    assert "was reformatted after it was recorded: its values are equal when parsed" in message, message
    assert "restore the file as it was recorded" in message and "corrupted" not in message, message


def test_an_edited_golden_is_still_an_edit(tmp_path: Path) -> None:
    record = golden_record([-1.0, -0.5])
    record["metadata"]["build"] = "another"
    path = tmp_path / "g.json"
    path.write_text(json.dumps(record))
    with pytest.raises(BitexactError, match="was edited after it was recorded"):
        bx_golden.load_golden(path, card="test-card", recipe="r")


@pytest.mark.parametrize(
    ("schema", "words"),
    [
        (3, "has schema 3: it was written by a newer bitexact (this one reads schema 2); upgrade bitexact"),
        (1, "has schema 1, older than this bitexact reads (schema 2); its digest covers less"),
        (2.0, 'a decimal; a schema is a whole number: write "schema": 2'),
        (True, "a boolean, not a schema number"),
    ],
)
def test_a_golden_of_another_schema_is_named_newer_older_or_malformed(
    schema: Any, words: str, tmp_path: Path
) -> None:
    record = golden_record([-1.0])
    record["schema"] = schema
    path = tmp_path / "g.json"
    path.write_text(json.dumps(record))
    with pytest.raises(BitexactError) as error:
        bx_golden.load_golden(path, card="test-card", recipe="r")
    assert words in str(error.value)


def test_a_history_line_of_a_newer_schema_is_named_newer() -> None:
    why = bx_history.shape_problem({"kind": bx_history.KIND, "schema": bx_history.SCHEMA + 1})
    assert why is not None and "written by a newer bitexact" in why and "upgrade bitexact" in why
    assert bx_history.shape_problem({"kind": "other"}) == "not a history line"
