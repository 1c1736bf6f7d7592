"""A run's results, written as they come: OUT/verdicts.jsonl (one line per step and tree), and from it the
summary and the one exit code.

A verdict line says what was compared and how it ended:
- `exit` 0 equal, 1 differs, 2 anything else (a server that did not start, a missing golden, a killed
  command), as `bitexact` says it; `left_out` (no exit) when the step does not apply here, with the reason;
- for the stock tree, `expect` (the plan's `differs` or `passes`) and `met`.

A rerun keeps the steps that compared something (exit 0 or 1) and runs again those that ended in an error
or were left out, so a run on a machine that was not ready never stands in for the real one."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

VERDICTS = "verdicts.jsonl"
INTERRUPTED = 130


def worst_exit(results: Iterable[dict[str, Any]]) -> int:
    """A step's verdict from its commands' exit codes: 0 equal, 1 differs, and anything else (2, or a
    negative code: killed by a signal) an error, so that a killed command never passes as compared."""
    return max((r["exit"] if r["exit"] in (0, 1) else 2 for r in results), default=2)


def expectation_met(expect: str, code: int) -> bool | None:
    """Whether the stock tree did what the plan says it must (None: it ended in an error)."""
    if code not in (0, 1):
        return None
    return (code == 1) if expect == "differs" else (code == 0)


@dataclass
class Verdicts:
    """The append-only verdicts file of one OUT folder, shared by the lanes of a run."""

    out: Path

    def __post_init__(self) -> None:
        self.path = self.out / VERDICTS
        self._lock = threading.Lock()

    def entries(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        entries = []
        for n, line in enumerate(self.path.read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                entries.append(json.loads(line))
            except json.JSONDecodeError:
                raise ValueError(
                    f"{self.path} line {n} is not JSON (a run cut off mid-write?): remove that line to resume"
                ) from None
        return entries

    def latest(self) -> dict[tuple[str, str], dict[str, Any]]:
        """The last verdict of each (tree, step): a rerun's verdict supersedes an error before it."""
        return {(e["tree"], e["step"]): e for e in self.entries()}

    def done(self) -> set[tuple[str, str]]:
        """(tree, step) whose latest verdict compared something: a rerun keeps them."""
        return {key for key, e in self.latest().items() if e.get("exit") in (0, 1)}

    def record(self, entry: dict[str, Any]) -> None:
        with self._lock, self.path.open("a") as f:
            f.write(json.dumps(entry) + "\n")
            f.flush()


def outcome(entry: dict[str, Any]) -> str:
    """One word for a verdict line: PASS, DIFFERS, ERROR, LEFT-OUT; on the stock tree EXPECTED or
    UNEXPECTED (the battery did not do what the plan says stock does)."""
    if "left_out" in entry and entry.get("exit") is None:
        return "LEFT-OUT"
    code = entry.get("exit")
    if code not in (0, 1):
        return "ERROR"
    if "expect" in entry:
        return "EXPECTED" if entry.get("met") else "UNEXPECTED"
    return "PASS" if code == 0 else "DIFFERS"


def overall_exit(entries: Iterable[dict[str, Any]], interrupted: bool = False) -> int:
    """130 when interrupted; else 2 when any step ended in an error or nothing ran; else 1 when any step
    differs (or the stock tree did not do what the plan says); else 0."""
    if interrupted:
        return INTERRUPTED
    words = [outcome(e) for e in entries]
    ran = [w for w in words if w != "LEFT-OUT"]
    if not ran or "ERROR" in words:
        return 2
    if "DIFFERS" in words or "UNEXPECTED" in words:
        return 1
    return 0


def result_line(result: dict[str, Any]) -> str:
    """What one bitexact command compared, from its --json summary."""
    summary = result.get("summary")
    if isinstance(summary, dict):
        verb = summary.get("verb", "")
        if verb == "warm":
            return (
                f"warm ({summary.get('mode')}): {summary.get('equal')}/{summary.get('compared')} equal to "
                f"the "
                f"{summary.get('reference')}, warm answers {summary.get('warm_hits_min')}+ tokens cached"
            )
        if verb == "repeat":
            return (
                f"repeat x{summary.get('repeats')}, {summary.get('batch')} in flight: "
                f"{summary.get('divergent')} of {summary.get('compared')} runs differ from the first"
            )
        if "equal" in summary and "prompts" in summary:
            return f"{verb} {summary['equal']}/{summary['prompts']} equal"
        if "prompts" in summary:
            return f"{verb} {summary['prompts']} prompts"
    if result.get("error"):
        return str(result["error"]).splitlines()[0][:200]
    return f"exit {result.get('exit')}"


def summary_lines(run: dict[str, Any], entries: list[dict[str, Any]], interrupted: bool = False) -> list[str]:
    latest = {(e["tree"], e["step"]): e for e in entries}
    lines = [f"bitexact-gpu-checks: {run.get('host_line', 'host unread')}"]
    for note in run.get("host_settings_notes", []):
        lines.append(f"  host setting: {note}")
    for (tree, step), entry in latest.items():
        word = outcome(entry)
        if entry.get("kind") == "kernels":
            detail = entry.get("why", "")
        elif word == "LEFT-OUT":
            detail = entry["left_out"]
        else:
            detail = "; ".join(result_line(r) for r in entry.get("results", [])) or entry.get("error", "")
            if "expect" in entry:
                must = {"differs": "differ", "passes": "pass"}.get(entry["expect"], entry["expect"])
                detail = f"stock must {must}: {detail}"
            if entry.get("left_out_commands"):
                reasons = "; ".join(sorted({c["left_out"] for c in entry["left_out_commands"]}))
                detail += f" (left out: {len(entry['left_out_commands'])} command(s): {reasons})"
        lines.append(f"{word:10} {tree}/{step}: {detail}")
        if entry.get("kind") == "kernels" and entry.get("left_out"):
            from gpuchecks.kernels import left_out_summary

            for group in left_out_summary(entry["left_out"]):
                lines.append(f"           left out {group}")
    code = overall_exit(latest.values(), interrupted)
    word = {0: "everything passed", 1: "something differs", 2: "errors", 130: "interrupted"}[code]
    lines.append(f"verdict: exit {code} ({word}); results in {run.get('out', '?')}")
    return lines
