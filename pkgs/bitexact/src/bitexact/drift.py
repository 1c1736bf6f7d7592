"""What a card's history says: its checks numbered in the order written, its builds numbered in the order
first seen (B1, B2, ...), what changed from one build to the next, and where bits moved. The pages
(report/history_page.py) render this; `bitexact history --diff` prints one comparison of it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from bitexact.errors import UsageError
from bitexact.history import component_changes

Change = tuple[str, str | None, str | None]


@dataclass
class Build:
    number: int  # B1 is the first build the history saw
    label: str
    components: dict[str, str]
    first_check: int
    first_at: str
    checks: list[int] = field(default_factory=list)
    verdicts: dict[str, int] = field(default_factory=dict)
    changes: list[Change] = field(default_factory=list)  # against the build seen before it

    @property
    def name(self) -> str:
        return f"B{self.number}"


@dataclass
class Check:
    number: int  # 1-based, in the order written
    line: dict[str, Any]
    build: Build


@dataclass
class Drift:
    card: str
    checks: list[Check]
    builds: list[Build]

    def lead(self) -> str:
        """The sentence a page opens with: DRIFT or NO DRIFT, counted over the checks (not recordings)."""
        checked = [c for c in self.checks if c.line["verdict"] != "RECORDED"]
        moved = [c for c in checked if c.line["verdict"] == "DIFFERENT"]
        builds = len(self.builds)
        if not checked:
            return f"NO CHECKS: {len(self.checks)} recording(s), no check yet, over {builds} build(s)."
        partial = [c for c in checked if c.line.get("golden_prompts", c.line["prompts"]) > c.line["prompts"]]
        if not moved:
            n = len(checked)
            some = (
                f" ({len(partial)} of them partial: fewer prompts than their golden holds, check "
                f"{', '.join(str(c.number) for c in partial[:5])}{', ...' if len(partial) > 5 else ''})"
                if partial
                else ""
            )
            return f"NO DRIFT: {n} of {n} checks equal their golden{some}, over {builds} build(s)."
        first = moved[0]
        return (
            f"DRIFT: {len(moved)} of {len(checked)} checks differ from their golden, over {builds} build(s); "
            f"first at check {first.number} ({first.build.name}, {first.line['at']})."
        )


def analyse(card: str, lines: list[dict[str, Any]], recipe: str | None = None) -> Drift:
    """Number the checks and builds of `lines` (those of `card`, and of `recipe` when given)."""
    chosen = [
        line
        for line in lines
        if line.get("card") == card and (recipe is None or line.get("recipe") == recipe)
    ]
    builds: dict[str, Build] = {}
    checks: list[Check] = []
    previous: Build | None = None
    for number, line in enumerate(chosen, 1):
        label = line["build"]["label"]
        build = builds.get(label)
        if build is None:
            build = Build(len(builds) + 1, label, line["build"]["components"], number, line["at"])
            if previous is not None:
                build.changes = component_changes(previous.components, build.components)
            builds[label] = build
        build.checks.append(number)
        build.verdicts[line["verdict"]] = build.verdicts.get(line["verdict"], 0) + 1
        checks.append(Check(number, line, build))
        previous = build
    return Drift(card, checks, list(builds.values()))


def resolve(drift: Drift, ref: str) -> tuple[str, dict[str, str]]:
    """A build named on the command line: `B2` (a build), `5` or `#5` (the build of check 5), or a
    prefix of a build label. Returns (a name for it, its components)."""
    # A build number (`B2`) or a check number (`5`, `#5`) within the history; anything else a label's
    # prefix (labels are lowercase hex: a prefix may be all digits, or start with b). `B` followed by
    # digits is always a build number: past the last build it is refused, not read as a label "b...".
    if re.fullmatch(r"[Bb]\d+", ref) and 1 <= int(ref[1:]) <= len(drift.builds):
        build = drift.builds[int(ref[1:]) - 1]
        return build.name, build.components
    if re.fullmatch(r"B\d+", ref):
        matches = []
    else:
        matches = [b for b in drift.builds if b.label.startswith(ref.lower().lstrip("#"))]
    if re.fullmatch(r"#?\d+", ref) and 1 <= int(ref.lstrip("#")) <= len(drift.checks):
        index = int(ref.lstrip("#"))
        check = drift.checks[index - 1]
        return f"check {index} ({check.build.name})", check.build.components
    if len(matches) == 1:
        return matches[0].name, matches[0].components
    labels = ", ".join(b.label for b in drift.builds)
    raise UsageError(
        f"--diff {ref!r} names no build of card {drift.card!r}: give B1..B{len(drift.builds)}, a check "
        f"number 1..{len(drift.checks)}, or a prefix of one build label ({labels})"
    )


def diff(drift: Drift, a: str, b: str) -> dict[str, Any]:
    name_a, comp_a = resolve(drift, a)
    name_b, comp_b = resolve(drift, b)
    return {"a": name_a, "b": name_b, "changes": component_changes(comp_a, comp_b)}
