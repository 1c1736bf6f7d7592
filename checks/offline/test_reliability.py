"""Every bad input in the catalogue (reliability_cases.py) is refused the way docs/reliability.md says:
its exit code, a message naming the thing and the fix, no traceback, nothing lost or left behind. The
commands are the real tools run as programs (reliability_run.py); the file-system faults are real tmpfs
mounts (root only)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from checkhelpers import reliability_catalogue as catalogue
from checkhelpers import reliability_run as runner

PAGE = catalogue.REPO / "docs" / "reliability.md"
MOUNTABLE = runner.can_mount()


@pytest.fixture(scope="module")
def results() -> dict[str, tuple[runner.Result, str]]:
    return runner.run_all()


def test_the_catalogue_is_large_and_its_ids_unique() -> None:
    ids = [case.id for case in catalogue.CASES]
    assert len(ids) >= 100
    assert len(set(ids)) == len(ids), [i for i in ids if ids.count(i) > 1]
    for tool in catalogue.PROGRAMS:
        assert any(case.tool == tool for case in catalogue.CASES), f"no case for {tool}"


@pytest.mark.parametrize("case", catalogue.CASES, ids=lambda case: case.id)
def test_bad_input_is_refused_clearly(case: catalogue.Case, results: dict) -> None:
    if case.fs is not None and not MOUNTABLE:
        pytest.skip("tmpfs mounts need root (or user namespaces); CI runs as root")
    result, _ = results[case.id]
    assert "Traceback" not in result.output, result.output
    assert re.search(case.expect, result.output), f"no message matching {case.expect!r} in:\n{result.output}"
    assert result.exit == case.exit, f"exit {result.exit}, not {case.exit}:\n{result.output}"
    assert result.problem is None, result.problem


def test_the_page_lists_every_case_with_its_command_exit_and_message() -> None:
    """docs/reliability.md is generated from the catalogue; each row's message must still be what the
    tool says (its pattern), so a changed message or exit code shows here until the page is rewritten."""
    text = PAGE.read_text()
    body = text[text.index(runner.BEGIN) + len(runner.BEGIN) : text.index(runner.END)]
    rows = {}
    for line in body.strip().splitlines()[2:]:
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        rows[cells[0]] = cells
    assert list(rows) == [case.id for case in catalogue.CASES]
    for case in catalogue.CASES:
        _, what, command, message, exit_code = rows[case.id]
        expected_row = runner.table([(case, message.replace("\\|", "|"))])[2]
        assert line_cells(expected_row) == rows[case.id], case.id
        assert what == case.what and exit_code == str(case.exit)
        assert re.search(case.expect, concrete(message)), (case.id, message)
        assert command.startswith("`") and catalogue.COMMAND_NAMES[case.tool] in command


def concrete(message: str) -> str:
    """A page message with its generic names filled in again, for the case's pattern to read."""
    for name, value in (
        ("\\|", "|"),
        ("$TMP", "/tmp/x"),
        ("pid N", "pid 1"),
        ("PORT", "1234"),
        ("KEY", "0123abcd"),
        ("#rN'", "#r0'"),
    ):
        message = message.replace(name, value)
    return message


def line_cells(line: str) -> list[str]:
    return [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]


def test_messages_are_made_generic_for_the_page(tmp_path: Path) -> None:
    raw = (
        f"{tmp_path}/o/repeat-sglang_http_127.0.0.1_45678-0123abcd.jsonl at 127.0.0.1:30000 "
        f"[e2e 10:11:12] port 51249 is taken (pid 77: {sys.executable} -c x); answer for 'p0#r1'"
    )
    assert runner.generic(raw, tmp_path, (45678, 51249)) == (
        "$TMP/o/repeat-sglang_http_127.0.0.1_PORT-KEY.jsonl at 127.0.0.1:30000 "
        "port PORT is taken (pid N: python -c x); answer for 'p0#rN'"
    )
