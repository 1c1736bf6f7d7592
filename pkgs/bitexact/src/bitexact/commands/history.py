"""`bitexact history CARD`: the card's drift history (every golden record and check of it) as one page."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from bitexact import drift, history
from bitexact.buildchanges import in_words
from bitexact.errors import UsageError
from bitexact.files import path_state
from bitexact.goldenselect import (
    golden_dir_of,
)
from bitexact.helptext import verb_parser
from bitexact.names import name_option
from bitexact.options import (
    add_out_options,
)
from bitexact.output import emit, write_reports
from bitexact.report.history_page import history_html, history_markdown
from bitexact.runs import Engines


def add_parser(sub: Any) -> None:
    p = verb_parser(
        sub, "history", help="a card's drift history as a page; the components between two builds"
    )
    p.add_argument("card", type=name_option, help="the card slug, as the goldens are keyed (e.g. h200)")
    p.add_argument(
        "--golden-dir",
        type=Path,
        help="where goldens live; the history is <dir>/<card>/history.jsonl (default: as golden record)",
    )
    p.add_argument("--history", type=Path, help="the history file itself (overrides --golden-dir)")
    p.add_argument(
        "--recipe", help="a recipe file: the default --golden-dir is checks/golden of its repository"
    )
    p.add_argument(
        "--recipe-name",
        type=name_option,
        help="only the lines of this recipe (default: every recipe of the card)",
    )
    p.add_argument(
        "--diff",
        nargs=2,
        metavar=("A", "B"),
        help="list the components that differ between two builds: B1, B2 ... (builds), 5 (the build of "
        "check 5) or a build label's prefix",
    )
    add_out_options(p, "where the page goes")
    p.set_defaults(run=run)


def run(args: argparse.Namespace, engines: Engines) -> int:
    """`engines`: none (the verb names no engine)."""
    path = args.history or golden_dir_of(args.golden_dir, args.recipe) / args.card / history.FILE_NAME
    if path_state(path) == "missing":  # a link that leads nowhere is named by read_text, not "no history"
        raise UsageError(
            f"no history for card {args.card!r} at {path}: `bitexact golden record` and `golden check` "
            "append to it; give --golden-dir DIR or --history FILE if it lives elsewhere"
        )
    found = drift.analyse(args.card, history.load(path), args.recipe_name)
    if not found.checks:
        raise UsageError(
            f"{path} holds no line for card {args.card!r}"
            + (f" and recipe {args.recipe_name!r}" if args.recipe_name else "")
        )
    compared = drift.diff(found, *args.diff) if args.diff else None
    stem = f"history-{args.card}"
    reports = write_reports(args.out, stem, history_markdown(found, compared), history_html(found, compared))
    if compared is not None and not args.json:
        for what, a, b in in_words(compared["changes"]):
            sys.stdout.write(f"{what}: {a} -> {b}\n")
        if not compared["changes"]:
            sys.stdout.write(f"no component differs between {compared['a']} and {compared['b']}\n")
    summary = {
        "verb": "history",
        "card": args.card,
        "history": str(path),
        "lead": found.lead(),
        "builds": [{"name": b.name, "label": b.label, "checks": b.checks} for b in found.builds],
        "checks": [c.line for c in found.checks],
        "diff": compared and {**compared, "in_words": in_words(compared["changes"])},
        "reports": reports,
    }
    emit(summary, args.json, f"history: {found.lead()} page: {reports[1]}")
    return 0
