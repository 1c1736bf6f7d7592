"""A golden write is one transaction (bitexact/landing.py), tested on real processes and real OS limits:
two `bitexact golden record` processes of one card and recipe at once (the second is refused at its
start, naming the first), a file size limit (RLIMIT_FSIZE, which makes write(2) fail with EFBIG at a
byte offset) that stops the write at any point of the landing, drawn by Hypothesis: the golden, its
reports and its history line are all there after exit 0, and after exit 2 all is as it was before, so
the same command, rerun without the limit, records (it never meets "golden exists").

The server is canned_sglang's (SGLang 0.5.20's shapes, bx_fake_servers.py cites them) on 127.0.0.1."""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from checkhelpers.bx_cli import interrupt_default, spawn
from checkhelpers.canned_sglang import CannedSGLang
from checkhelpers.fuzz_settings import fuzz
from hypothesis import event, given
from hypothesis import strategies as st

PROMPTS = '{"id": "p0", "input_ids": [5, 6, 7]}\n{"id": "p1", "input_ids": [9, 10]}\n'
CARD = "landing-card"


def record_argv(url: str, root: Path, out: str, recipe: str = "alpha", *extra: str) -> list[str]:
    return [
        "golden", "record", f"sglang+{url}", "--recipe-name", recipe, "--card", CARD, "--new-card",
        "--golden-dir", str(root / "g"), "--prompts", str(root / "p.jsonl"), "--max-new-tokens", "4",
        "--top-logprobs", "2", "--out", str(root / out), *extra,
    ]  # fmt: skip


def bitexact(argv: list[str], cwd: Path, fsize: int | None = None) -> subprocess.CompletedProcess[str]:
    """`python -m bitexact ARGV` as a process; `fsize`: its RLIMIT_FSIZE (no file grows past it)."""

    def limit() -> None:
        interrupt_default()
        if fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    return subprocess.run(
        [sys.executable, "-m", "bitexact", *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=limit,
    )


@pytest.fixture(scope="module")
def canned() -> Iterator[CannedSGLang]:
    with CannedSGLang("normal") as server:
        yield server


def snapshot(*folders: Path) -> dict[str, bytes]:
    """Every file under `folders` (by path) and its bytes; results files and the --out lock aside, which a
    run writes before the landing and keeps for a resume."""
    found = {}
    for folder in folders:
        for path in sorted(folder.rglob("*")) if folder.is_dir() else []:
            if path.is_file() and not path.name.endswith(".jsonl") or path.name == "history.jsonl":
                if path.name not in (".bitexact.lock", ".bitexact-run.json", ".bitexact-files"):
                    found[str(path)] = path.read_bytes()
    return found


def test_two_records_of_one_golden_at_once_the_second_is_refused_naming_the_first(tmp_path: Path) -> None:
    (tmp_path / "p.jsonl").write_text(PROMPTS)
    gate = threading.Event()
    golden = tmp_path / "g" / CARD / "alpha.json"
    lock = golden.with_name(".alpha.json.lock")
    with CannedSGLang("normal", delay=lambda body: 0.0 if gate.wait(60) else 0.0) as server:
        first = spawn(record_argv(server.url, tmp_path, "o1"), tmp_path)
        try:
            deadline = time.monotonic() + 60
            while f'"pid": {first.pid}' not in (lock.read_text() if lock.exists() else ""):
                assert first.poll() is None, first.communicate()
                assert time.monotonic() < deadline, "the first record never took the golden's lock"
                time.sleep(0.05)
            second = bitexact(record_argv(server.url, tmp_path, "o2"), tmp_path)
            assert second.returncode == 2, second.stderr
            assert "is being recorded by another bitexact run" in second.stderr
            assert f"pid {first.pid} on " in second.stderr and "golden record" in second.stderr
            assert not golden.exists() and not (tmp_path / "o2" / "golden-record.md").exists()
        finally:
            gate.set()
            _, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    assert json.loads(golden.read_text())["card"] == CARD
    history = (golden.parent / "history.jsonl").read_text().splitlines()
    assert len(history) == 1 and json.loads(history[0])["verdict"] == "RECORDED"
    assert not lock.exists(), "the lock file outlived its record"
    # the refused one, rerun now: the golden is there, and it says so
    again = bitexact(record_argv(server.url, tmp_path, "o2"), tmp_path)
    assert again.returncode == 2 and "exists; pass --force to replace it" in again.stderr


def test_a_history_that_cannot_take_its_line_takes_back_the_golden(
    canned: CannedSGLang, tmp_path: Path
) -> None:
    """The golden and reports are in place when the history append fails (a file size limit): all of
    them go, the history is as it was to the byte, and the same command then records."""
    (tmp_path / "p.jsonl").write_text(PROMPTS)
    assert bitexact(record_argv(canned.url, tmp_path, "o0", "alpha"), tmp_path).returncode == 0
    history = tmp_path / "g" / CARD / "history.jsonl"
    with history.open("a") as handle:
        handle.write("\n" * 200_000)  # blank lines, which a history reader skips: a long history
    before = snapshot(tmp_path / "g")
    argv = record_argv(canned.url, tmp_path, "o1", "beta")
    done = bitexact(argv, tmp_path, fsize=history.stat().st_size + 20)
    assert done.returncode == 2, done.stderr
    assert f"cannot write {history} (--history): File too large" in done.stderr
    assert "nothing of this record was kept" in done.stderr
    assert snapshot(tmp_path / "g") == before
    assert not (tmp_path / "o1" / "golden-record.md").exists()
    again = bitexact(argv, tmp_path)
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "g" / CARD / "beta.json").is_file()
    assert len([line for line in history.read_text().splitlines() if line]) == 2


@pytest.fixture(scope="module")
def sizes(canned: CannedSGLang) -> dict[str, int]:
    """The bytes of each file a record writes (the history: its one line), from a record like the drawn
    ones (a temporary folder's name is as long as another's)."""
    with tempfile.TemporaryDirectory() as temp:
        root = Path(temp)
        (root / "p.jsonl").write_text(PROMPTS)
        assert bitexact(record_argv(canned.url, root, "o", "alpha"), root).returncode == 0
        folder = root / "g" / CARD
        return {
            "golden-record.md": (root / "o" / "golden-record.md").stat().st_size,
            "golden-record.html": (root / "o" / "golden-record.html").stat().st_size,
            "golden": (folder / "alpha.json").stat().st_size,
            "history": (folder / "history.jsonl").stat().st_size,
        }


@fuzz(12)
@given(
    force=st.booleans(),
    history_lines=st.integers(0, 2),
    reports_before=st.sampled_from(["none", "bitexact's", "the user's"]),
    target=st.sampled_from(["golden-record.md", "golden-record.html", "golden", "history"]),
    offset=st.integers(-300, 300),
)
def test_a_golden_lands_whole_or_not_at_all(
    canned: CannedSGLang,
    sizes: dict[str, int],
    force: bool,
    history_lines: int,
    reports_before: str,
    target: str,
    offset: int,
) -> None:
    """A file size limit drawn around the end of one of the files the record writes (its history line:
    after the lines already there): exit 0 with everything written, or exit 2 with everything as it
    was, and the same command without the limit then records."""
    with tempfile.TemporaryDirectory() as temp:
        root = Path(temp)
        (root / "p.jsonl").write_text(PROMPTS)
        for n in range(history_lines):
            assert bitexact(record_argv(canned.url, root, f"h{n}", f"h{n}"), root).returncode == 0
        if force:
            assert bitexact(record_argv(canned.url, root, "old", "alpha"), root).returncode == 0
        if reports_before != "none":  # reports of an earlier run, or files of the user's of those names
            (root / "o").mkdir()
            names = ["golden-record.md", "golden-record.html"]
            for name in names:
                (root / "o" / name).write_text("an older report\n")
            (root / "o" / ".bitexact-run.json").write_text(
                json.dumps({"kind": "bitexact-run", "runs": {}}) + "\n"
            )
            listed = names if reports_before == "bitexact's" else []
            (root / "o" / ".bitexact-files").write_text(  # bitexact's manifest (ownership.py)
                "".join(
                    json.dumps(x) + "\n" for x in [{"kind": "bitexact-files"}, *({"file": n} for n in listed)]
                )
            )
        golden = root / "g" / CARD / "alpha.json"
        history = root / "g" / CARD / "history.jsonl"
        start = history.stat().st_size if target == "history" and history.exists() else 0
        limit = max(64, start + sizes[target] + offset)
        before = snapshot(root / "g", root / "o")
        argv = record_argv(canned.url, root, "o", "alpha", *(["--force"] if force else []))
        done = bitexact(argv, root, fsize=limit)
        assert done.returncode in (0, 2), done.stderr
        failed = re.search(r"cannot (?:write|append to) (\S+)", done.stderr)
        event(f"exit {done.returncode}" + (f": {Path(failed.group(1)).name}" if failed else ""))
        assert "Traceback" not in done.stderr and "internal error" not in done.stderr
        left = [p.name for p in root.rglob("*") if p.name.endswith((".tmp", ".old", ".json.lock"))]
        assert not left, left
        if reports_before == "the user's":
            assert done.returncode == 2, done.stderr  # refused: the user's reports, or the limit before
            assert failed or "is there and is not bitexact's" in done.stderr, done.stderr
            assert snapshot(root / "g", root / "o") == before
            return
        if done.returncode == 0:
            record = json.loads(golden.read_text())
            lines = [json.loads(x) for x in (golden.parent / "history.jsonl").read_text().splitlines() if x]
            assert lines[-1]["golden"]["digest"] == record["digest"]
            assert "golden record" in (root / "o" / "golden-record.md").read_text()
            return
        assert snapshot(root / "g", root / "o") == before, done.stderr
        if not force and history_lines == 0:
            assert not (root / "g" / CARD).exists(), "a failed record of a new card left its folder"
        again = bitexact(argv, root)
        assert again.returncode == 0, again.stderr
        assert os.path.isfile(golden)
