"""Catalogue rows of bitexact's writes: a golden written as one transaction (a lock on the golden, every
destination proven writable before the run), files in --out replaced only where bitexact's manifest
lists them, and paths that are not UTF-8 shown escaped. reliability_catalogue.py joins them with the rest."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from checkhelpers.canned_sglang import CannedSGLang
from checkhelpers.reliability_setup import (
    FAST,
    PROMPTS,
    URL,
    Case,
    Check,
    Setup,
    absent,
    both,
    both_checks,
    common,
    golden_args,
    other_run,
    prompts,
    rows_kept,
    unchanged,
    write,
)

GOLDEN = "g/h200/qwen3.8-27b-exact.json"


def golden_lock_holder(tmp: Path) -> None:
    """Another `bitexact golden record` of the same card and recipe, mid-run: a real process holding the
    golden's lock (`.NAME.lock` beside it), named in the lock file as bitexact names itself there."""
    lock = tmp / Path(GOLDEN).parent / f".{Path(GOLDEN).name}.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    code = (
        "import fcntl, json, os, sys, time\n"
        "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\n"
        "os.write(fd, json.dumps({'pid': os.getpid(), 'host': 'here', 'started': 'now', "
        "'command': 'bitexact golden record A'}).encode())\n"
        "print('held', flush=True)\n"
        "time.sleep(60)\n"
    )
    holder = subprocess.Popen([sys.executable, "-c", code, str(lock)], stdout=subprocess.PIPE)
    assert holder.stdout is not None
    holder.stdout.readline()
    (tmp / "holder.pid").write_text(str(holder.pid))


def record_into(folder: str) -> Setup:
    """A golden recorded into `folder` (under the case's temporary folder) by bitexact itself, against a
    canned server of its own, before the case runs."""

    def setup(tmp: Path) -> None:
        with CannedSGLang("normal") as server:
            argv = [
                "golden", "record", f"sglang+{server.url}", *golden_args[:-1], str(tmp / folder),
                "--prompts", str(tmp / "p.jsonl"), "--max-new-tokens", "4", "--top-logprobs", "2",
                "--out", str(tmp / "r"),
            ]  # fmt: skip
            done = subprocess.run([sys.executable, "-m", "bitexact", *argv], capture_output=True, env=_env())
            assert done.returncode == 0, done.stderr

    return setup


def _env() -> dict[str, str]:
    return dict(os.environ)


def unchanged_lines(rel: str, count: int) -> Check:
    """`rel` holds `count` whole lines (the record's and the check's history lines)."""

    def check(tmp: Path) -> str | None:
        data = (tmp / rel).read_bytes() if (tmp / rel).is_file() else b""
        lines = data.count(b"\n")
        return None if lines == count and data.endswith(b"\n") else f"{rel}: {lines} lines, not {count}"

    return check


CASES: list[Case] = [
    Case(
        "bx-record-busy",
        "bitexact",
        "two records of one card and recipe at once",
        ("golden", "record", "sglang+{url}", *golden_args, *common),
        2,
        r"golden .*/qwen3.8-27b-exact.json is being recorded by another bitexact run \(pid \d+ on here, "
        r"started now: `bitexact golden record A`\); .*wait for it to finish",
        both(prompts, golden_lock_holder),
        server="normal",
        check=both_checks(absent(GOLDEN), rows_kept("o", 0)),
    ),
    Case(
        "bx-record-history-readonly",
        "bitexact",
        "--history on a read-only file system (checked before the run, not after the golden is written)",
        ("golden", "record", "sglang+{url}", *golden_args, "--history", "{tmp}/mnt/h.jsonl", *common),
        2,
        r"--history .*mnt/h.jsonl: cannot write there: Read-only file system .*checked before the run, so "
        r"nothing ran",
        prompts,
        server="normal",
        fs="ro",
        check=both_checks(absent(GOLDEN), rows_kept("o", 0)),
    ),
    Case(
        "bx-out-user-report-name",
        "bitexact",
        "a file of the user's in --out named as the run's report (`repeat.md`): never replaced",
        ("repeat", URL + FAST, *common),
        2,
        r"--out .*/o: repeat.md is there and is not bitexact's \(no bitexact run entered it in "
        r".bitexact-files\), so it stays untouched.*give another --out",
        both(prompts, write("o/repeat.md", "my notes\n")),
        check=unchanged("o/repeat.md", "my notes\n"),
    ),
    Case(
        "bx-out-force-lookalikes",
        "bitexact",
        "--force in an --out holding files of the user's named like bitexact's (`repeat-notes.md`, "
        "`bitexact-crash-mine.txt`)",
        ("repeat", URL + FAST, "-n", "3", *common, "--force"),
        2,
        r"--force: .* moved to .*/o/replaced/run-.*; files of yours there stay untouched, whatever their "
        r"names \(bitexact-crash-mine.txt, p.jsonl, repeat-notes.md: .bitexact-files does not list "
        r"them\)",
        both(
            prompts,
            other_run(("repeat", URL + FAST, "-n", "2", *common)),
            write("o/repeat-notes.md", "mine\n"),
            write("o/bitexact-crash-mine.txt", "mine\n"),
            write("o/p.jsonl", PROMPTS),
        ),
        check=both_checks(
            unchanged("o/repeat-notes.md", "mine\n"), unchanged("o/bitexact-crash-mine.txt", "mine\n")
        ),
    ),
    Case(
        "bx-record-check-not-utf8",
        "bitexact",
        "a golden record and check whose --golden-dir and --out names hold a byte that is not UTF-8 (0xff)",
        (
            "golden",
            "check",
            "sglang+{url}",
            *golden_args[:-1],
            "{tmp}/g\udcff",
            "--prompts",
            "{tmp}/p.jsonl",
            "--max-new-tokens",
            "4",
            "--top-logprobs",
            "2",
            "--out",
            "{tmp}/c\udcff",
        ),
        0,
        r"golden check: EQUAL: 2/2 prompts equal to .*/g\\xff/h200/qwen3.8-27b-exact.json; .*report: "
        r".*/c\\xff/golden-check.html",
        both(prompts, record_into("g\udcff")),
        server="normal",
        check=unchanged_lines("g\udcff/h200/history.jsonl", 2),
    ),
]
