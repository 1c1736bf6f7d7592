"""bitexact moves or replaces only files its manifest in --out lists (bitexact/ownership.py), never files
whose names merely look like its own. Names of the user's files are drawn by Hypothesis around
bitexact's (`repeat-notes.md`, `A-plan.txt`, `bitexact-crash-mine.txt`, a folder `replaced`, and the
exact names a run writes); the runs are `bitexact repeat` against canned_sglang's server (SGLang 0.5.20's
shapes, bx_fake_servers.py cites them) on 127.0.0.1, in process for the drawn cases and as processes
for the fixed ones. What must hold: every file of the user's stays where it was, byte for byte; a run
that needs a name the user holds is refused naming it, and a --force run names the files it left."""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from bitexact.cli import main
from checkhelpers.canned_sglang import CannedSGLang
from checkhelpers.fuzz_settings import fuzz
from hypothesis import event, given
from hypothesis import strategies as st

PROMPTS = '{"id": "p0", "input_ids": [5, 6, 7]}\n{"id": "p1", "input_ids": [9, 10]}\n'
PREFIXES = (
    "repeat",
    "A-",
    "B-",
    "parity",
    "golden",
    "check-",
    "bench",
    "history-",
    "warm",
    "bitexact-crash-",
)
NAME_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789._-"


def repeat_argv(url: str, root: Path, n: int, *extra: str) -> list[str]:
    return [
        "repeat", f"sglang+{url}", "-n", str(n), "--prompts", str(root / "p.jsonl"), "--max-new-tokens",
        "4", "--top-logprobs", "2", "--out", str(root / "o"), *extra,
    ]  # fmt: skip


def cli(argv: list[str]) -> tuple[int, str]:
    """`bitexact ARGV` in process: (exit code, stderr)."""
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        rc = main(argv)
    return rc, err.getvalue()


def tree(root: Path) -> dict[str, bytes | None]:
    """Every entry under `root` by relative path: a file's bytes, None for a folder."""
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))
    }


@pytest.fixture(scope="module")
def canned() -> Iterator[CannedSGLang]:
    with CannedSGLang("normal") as server:
        yield server


@pytest.fixture(scope="module")
def writes(canned: CannedSGLang) -> frozenset[str]:
    """The names a `repeat` run writes in a fresh --out (its control files aside), as the folder shows."""
    with tempfile.TemporaryDirectory() as temp:
        root = Path(temp)
        (root / "p.jsonl").write_text(PROMPTS)
        rc, err = cli(repeat_argv(canned.url, root, 2))
        assert rc == 0, err
        return frozenset(p.name for p in (root / "o").iterdir() if not p.name.startswith("."))


def user_name(writes: frozenset[str]) -> st.SearchStrategy[str]:
    near = st.builds(
        lambda prefix, tail: prefix + tail, st.sampled_from(PREFIXES), st.text(NAME_CHARS, max_size=8)
    )
    return st.one_of(near, st.sampled_from(sorted(writes | {"replaced"})))


@fuzz(25)
@given(data=st.data())
def test_files_of_the_user_are_never_moved_or_replaced_whatever_their_names(
    canned: CannedSGLang, writes: frozenset[str], data: st.DataObject
) -> None:
    names = data.draw(st.sets(user_name(writes), min_size=1, max_size=4), label="names")
    folders = data.draw(st.sets(st.sampled_from(sorted(names))), label="folders")
    with tempfile.TemporaryDirectory() as temp:
        root = Path(temp)
        (root / "p.jsonl").write_text(PROMPTS)
        out = root / "o"
        out.mkdir()
        for name in names:
            if name in folders:
                (out / name).mkdir()
                (out / name / "inside.txt").write_text(f"the user's {name}/\n")
            else:
                (out / name).write_text(f"the user's {name}\n")
        mine = tree(out)
        rc, err = cli(repeat_argv(canned.url, root, 2))
        assert "Traceback" not in err and "internal error" not in err, err
        if names & writes:  # a name the run must write is the user's: refused, naming it
            event("a name the first run needs")
            assert rc == 2 and "is there and is not bitexact's" in err and "stays untouched" in err, err
            assert any(f"{name} is there" in err for name in names & writes), err
        else:
            assert rc == 0, err
            rc, err = cli(repeat_argv(canned.url, root, 3, "--force"))
            if "replaced" in names:  # --force sets bitexact's files aside in `replaced`: the user's
                event("a folder or file named replaced")
                assert rc == 2 and "replaced is there and is not bitexact's" in err, err
            else:
                event("forced past the user's files")
                assert rc == 0, err
                assert "files of yours there stay untouched" in err, err
                assert all(name in err for name in sorted(names)[:5]), err
                moved = list((out / "replaced").glob("run-*"))
                assert len(moved) == 1 and {p.name for p in moved[0].iterdir()} >= writes, moved
        after = tree(out)
        assert {k: v for k, v in after.items() if k in mine} == mine, "a file of the user's changed or moved"


def run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bitexact", *argv], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def test_a_user_file_of_a_report_name_is_left_and_named(canned: CannedSGLang, tmp_path: Path) -> None:
    """As processes: a `repeat.md` of the user's in --out is never replaced; the run is refused before
    it asks anything, and says the file stays."""
    (tmp_path / "p.jsonl").write_text(PROMPTS)
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "repeat.md").write_text("my notes\n")
    asked = canned.attempts
    done = run(repeat_argv(canned.url, tmp_path, 2), tmp_path)
    assert done.returncode == 2, done.stderr
    assert "repeat.md is there and is not bitexact's" in done.stderr and "stays untouched" in done.stderr
    assert (tmp_path / "o" / "repeat.md").read_text() == "my notes\n"
    assert canned.attempts == asked, "the run asked the server before it was refused"


def test_force_moves_only_what_the_manifest_lists(canned: CannedSGLang, tmp_path: Path) -> None:
    """As processes: files named like bitexact's (`repeat-notes.md`, `A-plan.txt`, a crash report's
    name) stay through --force, and the message names them."""
    (tmp_path / "p.jsonl").write_text(PROMPTS)
    assert run(repeat_argv(canned.url, tmp_path, 2), tmp_path).returncode == 0
    out = tmp_path / "o"
    users = ["A-plan.txt", "bitexact-crash-mine.txt", "repeat-notes.md"]
    for name in users:
        (out / name).write_text(f"mine: {name}\n")
    done = run(repeat_argv(canned.url, tmp_path, 3, "--force"), tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"files of yours there stay untouched, whatever their names ({', '.join(users)}" in done.stderr
    for name in users:
        assert (out / name).read_text() == f"mine: {name}\n"
    (moved,) = (out / "replaced").glob("run-*")
    assert (moved / "repeat.md").is_file() and not any((moved / name).exists() for name in users)
