"""Paths that are not UTF-8 (Linux allows any bytes but "/" and NUL in a name): bitexact shows them
escaped (`\\xNN`, files.SHOWN and files.shown) in its reports, its verdict line and its crash reports, a
write never fails on them, and the exit code stays the verdict's (a check that compared equal exits 0).

Names are drawn by Hypothesis as bytes (any but "/" and NUL, UTF-8 or not) for --out, --golden-dir and
the prompt file, in process; the fixed cases run bitexact as a process with such arguments, against
canned_sglang's server (SGLang 0.5.20's shapes, bx_fake_servers.py cites them) on 127.0.0.1."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from bitexact.cli import crash_report, main
from bitexact.files import displayable, shown
from checkhelpers.canned_sglang import CannedSGLang
from checkhelpers.fuzz_settings import fuzz
from hypothesis import event, given
from hypothesis import strategies as st

PROMPTS = '{"id": "p0", "input_ids": [5, 6, 7]}\n{"id": "p1", "input_ids": [9, 10]}\n'
SETTINGS = ["--max-new-tokens", "4", "--top-logprobs", "2"]


def golden_argv(verb: str, url: str, golden_dir: Path, prompts: Path, out: Path) -> list[str]:
    new_card = ["--new-card"] if verb == "record" else []
    return [
        "golden", verb, f"sglang+{url}", "--recipe-name", "tiny", "--card", "c1", *new_card,
        "--golden-dir", str(golden_dir), "--prompts", str(prompts), *SETTINGS, "--out", str(out),
    ]  # fmt: skip


def cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(argv)
    return rc, out.getvalue(), err.getvalue()


def utf8_files(folder: Path) -> list[Path]:
    """Every file bitexact wrote under `folder`, each proven to be UTF-8 text."""
    found = [p for p in folder.rglob("*") if p.is_file()]
    for path in found:
        path.read_bytes().decode("utf-8")
    return found


@pytest.fixture(scope="module")
def canned() -> Iterator[CannedSGLang]:
    with CannedSGLang("normal") as server:
        yield server


# Bytes a name may hold, but "/" and the control characters (which messages quote, files.shown): UTF-8
# or not, as drawn.
NAME_BYTES = [b for b in range(0x20, 0x100) if b not in (0x2F, 0x7F)]
names = st.lists(st.sampled_from(NAME_BYTES), min_size=1, max_size=6).map(bytes)


@fuzz(20)
@given(name=names)
def test_a_path_of_any_bytes_is_shown_escaped_and_the_verdict_stands(
    canned: CannedSGLang, name: bytes
) -> None:
    try:
        name.decode("utf-8")
        event("a UTF-8 name")
    except UnicodeDecodeError:
        event("a name that is not UTF-8")
    with tempfile.TemporaryDirectory() as temp:
        root = Path(temp)
        golden_dir = root / os.fsdecode(b"g-" + name)
        prompts = root / os.fsdecode(b"p-" + name + b".jsonl")
        prompts.write_text(PROMPTS)
        for verb, out in (("record", b"r-"), ("check", b"c-")):
            rc, stdout, stderr = cli(
                golden_argv(verb, canned.url, golden_dir, prompts, root / os.fsdecode(out + name))
            )
            assert rc == 0, stderr
            assert "Traceback" not in stderr and "internal error" not in stderr, stderr
            stdout.encode("utf-8")  # what a UTF-8 terminal takes: no lone surrogate of a name left raw
            golden = golden_dir / "c1" / "tiny.json"
            assert displayable(str(golden)) in stdout, stdout  # its bytes that are not UTF-8 as \xNN
            reports = utf8_files(root / os.fsdecode(out + name))
            report = next(p for p in reports if p.suffix == ".md")
            assert displayable(str(golden)) in report.read_text(), "the report does not show the golden"
        assert "EQUAL" in stdout


def run(argv: list[str | bytes], cwd: Path) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "LC_ALL": "C.UTF-8"}
    env.pop("PYTHONIOENCODING", None)
    return subprocess.run([sys.executable, "-m", "bitexact", *argv], cwd=cwd, capture_output=True, env=env)


def test_a_record_and_check_in_folders_not_utf8_exit_0_as_processes(
    canned: CannedSGLang, tmp_path: Path
) -> None:
    """As processes on a UTF-8 terminal: a golden dir, an --out and a prompt file whose names hold the
    byte 0xff record and check EQUAL with exit 0; the verdict, the reports and the history show them
    as `\\xff`."""
    root = os.fsencode(tmp_path)
    (tmp_path / os.fsdecode(b"p\xff.jsonl")).write_text(PROMPTS)
    common = [b"--recipe-name", b"tiny", b"--card", b"c1", b"--golden-dir", root + b"/g\xff"]
    common += [b"--prompts", root + b"/p\xff.jsonl", *(s.encode() for s in SETTINGS)]
    engine = f"sglang+{canned.url}".encode()
    record = run([b"golden", b"record", engine, *common, b"--new-card", b"--out", root + b"/r\xff"], tmp_path)
    assert record.returncode == 0, record.stderr
    assert b"g\\xff/c1/tiny.json" in record.stdout, record.stdout
    check = run([b"golden", b"check", engine, *common, b"--out", root + b"/c\xff"], tmp_path)
    assert check.returncode == 0, check.stderr
    assert b"golden check: EQUAL" in check.stdout and b"Traceback" not in check.stderr
    assert "g\\xff/c1/tiny.json" in (tmp_path / os.fsdecode(b"c\xff") / "golden-check.md").read_text()
    history = (tmp_path / os.fsdecode(b"g\xff") / "c1" / "history.jsonl").read_bytes()
    assert history.count(b"\n") == 2 and history.isascii()
    again = run([b"golden", b"record", engine, *common, b"--new-card", b"--out", root + b"/s\xff"], tmp_path)
    assert again.returncode == 2 and b"g\\xff/c1/tiny.json exists; pass --force" in again.stderr, again.stderr


def test_the_crash_reporter_writes_a_path_not_utf8_escaped(tmp_path: Path) -> None:
    """An error no check foresaw, with --out and an argument whose names are not UTF-8: its traceback
    file is written (in that --out), as UTF-8 with the bytes escaped, and the line naming it prints."""
    out = tmp_path / os.fsdecode(b"o\xfe")
    out.mkdir()
    try:
        raise RuntimeError(f"a bug meeting {out}")
    except RuntimeError as error:
        line = crash_report(error, out, ["repeat", os.fsdecode(b"x\xff")])
    line.encode("utf-8")
    (report,) = [p for p in utf8_files(out) if p.name.startswith("bitexact-crash-")]
    text = report.read_text()
    assert "x\\xff" in text and "o\\xfe" in text and "RuntimeError" in text
    assert shown(report) in line
