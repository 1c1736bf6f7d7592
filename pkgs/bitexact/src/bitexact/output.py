"""What a verb leaves: its reports in --out, and its one line (or --json summary) on stdout."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

from bitexact.files import atomic_write_text, displayable, dumps
from bitexact.ownership import take
from bitexact.report.html import comparison_html
from bitexact.report.markdown import comparison_markdown


def report_paths(out: Path, stem: str) -> list[Path]:
    """A verb's two reports in --out, Markdown then HTML, taken as bitexact's (ownership.py: a file of the
    user's of that name is refused, never replaced)."""
    return [take(out / f"{stem}.md"), take(out / f"{stem}.html")]


def write_reports(out: Path, stem: str, markdown: str, html: str) -> list[str]:
    paths = report_paths(out, stem)
    atomic_write_text(paths[0], markdown)
    atomic_write_text(paths[1], html)
    return [str(p) for p in paths]


def emit(summary: dict[str, Any], as_json: bool, verdict: str) -> None:
    """`--json`: the summary; otherwise one line, the verdict (details are in the reports)."""
    if as_json:
        sys.stdout.write(dumps(finite_or_text(summary), indent=1, default=str))
        sys.stdout.write("\n")
    else:  # a path that is not UTF-8 in it is shown escaped (files.SHOWN), never an encoding error
        sys.stdout.write(displayable(verdict.replace("\n", " ")) + "\n")
    sys.stdout.flush()


def finite_or_text(value: Any) -> Any:
    """`value` with every non-finite float replaced by its text ("inf", "nan"): --json stays standard JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: finite_or_text(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite_or_text(v) for v in value]
    return value


def write_comparison(out: Path, stem: str, summary: dict[str, Any]) -> list[str]:
    """A comparison's two reports (parity, golden check, a warm pass)."""
    return write_reports(out, stem, comparison_markdown(summary), comparison_html(summary))
