"""The drift history of a card as one page, markdown and HTML: the lead (DRIFT or NO DRIFT), the
timeline, the builds with what changed from one to the next, every check with its first divergence,
and, when asked, the components that differ between two builds."""

from __future__ import annotations

from typing import Any

from bitexact.buildchanges import in_one_line, in_words
from bitexact.drift import Build, Drift
from bitexact.report import html as H
from bitexact.report.fmt import text
from bitexact.report.markdown import table
from bitexact.report.timeline import VERDICT_COLOURS, timeline

BUILD_HEADER = ["build", "label", "first seen", "checks", "verdicts", "changed from the build before"]
CHECK_HEADER = [
    "check",
    "at",
    "recipe / variant",
    "build",
    "golden (its build)",
    "verdict",
    "equal",
    "first divergence",
    "margin there",
    "prompts touched",
]
DIFF_HEADER = ["what changed", "A", "B"]


def when(at: str) -> str:
    """An ISO time as a page shows it: `2026-12-01 15:44:04 UTC` (no break inside the date)."""
    return at.replace("T", " ").replace("+00:00", " UTC")


def build_rows(drift: Drift) -> list[list[str]]:
    def changed(build: Build) -> str:
        return "(the first build)" if build.number == 1 else in_one_line(build.changes)

    return [
        [
            b.name,
            b.label,
            f"check {b.first_check}, {when(b.first_at)}",
            ", ".join(str(n) for n in b.checks),
            ", ".join(f"{v} {n}" for v, n in sorted(b.verdicts.items())),
            changed(b),
        ]
        for b in drift.builds
    ]


def check_rows(drift: Drift) -> list[list[str]]:
    builds = {b.label: b.name for b in drift.builds}
    rows = []
    for check in drift.checks:
        line = check.line
        first = line.get("first_divergence")
        golden_build = line["golden"].get("build")
        golden = (
            f"{when(line['golden'].get('recorded') or '-')} ({builds.get(golden_build, golden_build or '-')})"
        )
        touched = line["touched"]
        rows.append(
            [
                str(check.number),
                when(line["at"]),
                f"{line['recipe']} / {line['variant']}",
                check.build.name,
                golden,
                line["verdict"],
                f"{line['equal']}/{line['prompts']}"
                + (f" (partial: of {line['golden_prompts']})" if "golden_prompts" in line else ""),
                f"{first['prompt']} at {first['position']} ({first['differs_in']})" if first else "-",
                text(first["margin"]) if first else "-",
                f"{len(touched)}: {', '.join(touched[:6])}{' ...' if len(touched) > 6 else ''}"
                if touched
                else "0",
            ]
        )
    return rows


def diff_rows(result: dict[str, Any]) -> list[list[str]]:
    return [[what, a, b] for what, a, b in in_words(result["changes"])]


def history_markdown(drift: Drift, diff: dict[str, Any] | None = None) -> str:
    out = [f"# drift history: card {drift.card}", "", f"**{drift.lead()}**", "", "## Builds", ""]
    out += table(BUILD_HEADER, build_rows(drift))
    out += ["", "## Checks", ""]
    out += table(CHECK_HEADER, check_rows(drift))
    if diff is not None:
        out += ["", f"## Components: A = {diff['a']}, B = {diff['b']}", ""]
        out += table(DIFF_HEADER, diff_rows(diff)) if diff["changes"] else ["No component differs."]
    return "\n".join(out) + "\n"


def history_html(drift: Drift, diff: dict[str, Any] | None = None) -> str:
    lead, _, rest = drift.lead().partition(":")
    legend = H.legend([(c, v) for v, c in VERDICT_COLOURS.items()])
    body = [
        f'<p class="verdict"><b>{H.esc(lead)}:</b>{H.esc(rest)}</p>',
        "<h2>Timeline</h2>",
        "<p>One point per recording and check; dashed rules mark a new build (hover for what changed).</p>",
        timeline(drift),
        legend,
        "<h2>Builds</h2>",
        H.table(BUILD_HEADER, build_rows(drift), "builds"),
        "<h2>Checks</h2>",
        H.table(CHECK_HEADER, check_rows(drift), "checks"),
    ]
    if diff is not None:
        body.append(f"<h2>Components: A = {H.esc(diff['a'])}, B = {H.esc(diff['b'])}</h2>")
        body.append(
            H.table(DIFF_HEADER, diff_rows(diff), "diff")
            if diff["changes"]
            else "<p>No component differs.</p>"
        )
    return H.page(f"drift history: card {drift.card}", "\n".join(body))
