"""The bitexact fuzzer's shared parts: running the CLI in process and judging a run, and the servers
the fuzzers (test_bitexact_fuzz_*.py) run against. What the fuzzers hold for every draw:

- the exit code is 0, 1, 2 or 130, and nothing unforeseen happened (no traceback, no "internal error");
- nothing outside --out changes, but for what the command is there to write (a new golden where none
  was, a line appended to a history); an existing golden changes only with --force;
- EQUAL and REPEATABLE only when every answer the server sent holds, at every position, a token id, a
  finite logprob <= 0 and the requested top-k alternatives (judged from the raw answers, by
  bx_fuzz_answers.py's own reading of SGLang's shape, not by bitexact's code), and an answer that holds
  all of that is never refused;
- a prompt file is accepted exactly when it is one by the JSON Lines format and the prompt schema
  (test_bitexact_fuzz_inputs.py's own reading); a golden edited in any way is never passed.

Settings: fuzz_settings.py, as for the other fuzzers (BITEXACT_FUZZ_PROFILE: `ci`, the default, seeded
and bounded, what the offline suite runs; `long` by hand, unseeded, 25 times the examples):

    BITEXACT_FUZZ_PROFILE=long .venv/bin/python -m pytest --rootdir . -p no:cacheprovider \\
        --import-mode=importlib -q --hypothesis-show-statistics \\
        checks/offline/bitexact/test_bitexact_fuzz_*.py
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from bitexact.cli import main
from hypothesis import event
from hypothesis import strategies as st

from checkhelpers.bx_fuzz_servers import ScriptedSGLang
from checkhelpers.canned_sglang import CannedSGLang

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


# --- values every fuzzer draws from -------------------------------------------------------------------

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


def json_paths(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [at]
    if isinstance(value, dict):
        for key, inner in value.items():
            found += json_paths(inner, (*at, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            found += json_paths(inner, (*at, index))
    return found


HISTORY = {
    "kind": "bitexact-history", "schema": 1, "at": "2026-12-01T00:00:00+00:00", "verdict": "DIFFERENT",
    "card": "h200", "recipe": "r", "variant": "recipe", "engine": "sglang+http://h:1",
    "golden": {"path": "g.json", "digest": "0" * 64, "recorded": None, "build": None},
    "build": {"label": "0123456789ab", "components": {"bitexact": "0.1.0", "build.sglang.patches": "a b"}},
    "prompts": 2, "equal": 1, "tokens_differ": 1, "touched": ["p0"],
    "first_divergence": {"prompt": "p0", "position": 1, "differs_in": "logprob", "margin": 0.5,
                         "token_flip": False},
}  # fmt: skip
