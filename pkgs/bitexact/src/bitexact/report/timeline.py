"""The drift timeline: one point per history line (x: the check's number, y: the prompts that differ from
the golden), coloured by verdict, with a dashed rule wherever the build changes, named B1, B2, ..."""

from __future__ import annotations

import html

from bitexact.buildchanges import in_one_line
from bitexact.drift import Check, Drift
from bitexact.report.fmt import text
from bitexact.report.svg import LEFT, PLOT_H, PLOT_W, TOP, H, W, axis_labels, ticks, x_tick, y_of, y_tick

VERDICT_COLOURS = {"RECORDED": "#555555", "EQUAL": "#2e8b57", "DIFFERENT": "#c0392b"}


def _point_title(check: Check) -> str:
    line = check.line
    first = line.get("first_divergence")
    where = (
        f"; first divergence: prompt {first['prompt']} at {first['position']} ({first['differs_in']}), "
        f"margin {text(first['margin'])}"
        if first
        else ""
    )
    return (
        f"check {check.number} ({check.build.name}, {line['at']}): {line['verdict']}, "
        f"{len(line['touched'])}/{line['prompts']} prompts differ{where}"
    )


def timeline(drift: Drift) -> str:
    count = max(len(drift.checks), 1)
    step = PLOT_W / count
    y_max = float(max((c.line["prompts"] for c in drift.checks), default=1) or 1)
    bottom = TOP + PLOT_H

    def px(number: int) -> float:
        return LEFT + step * (number - 0.5)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="plot timeline" width="{W}" height="{H}" '
        f'viewBox="0 0 {W} {H}" role="img" aria-label="prompts that differ from the golden, by check">',
        f'<rect class="frame" x="{LEFT}" y="{TOP}" width="{PLOT_W}" height="{PLOT_H}" fill="none" '
        'stroke="#ddd"/>',
        f'<line class="axis" x1="{LEFT}" y1="{bottom}" x2="{LEFT + PLOT_W}" y2="{bottom}" stroke="black"/>',
        f'<line class="axis" x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{bottom}" stroke="black"/>',
        '<g class="x-axis">',
    ]
    every = max(1, round(count / 20))  # at most about 20 labels
    for check in drift.checks:
        if (check.number - 1) % every == 0 or check.number == count:
            out += x_tick(px(check.number), str(check.number))
    out += ["</g>", '<g class="y-axis">']
    for value in ticks(y_max, True):
        out += y_tick(y_of(value, y_max), str(int(value)))
    out += [
        "</g>",
        *axis_labels("check, in the order run", "prompts that differ from the golden"),
        '<g class="builds">',
    ]
    previous = None
    for check in drift.checks:
        if check.build is not previous:
            x = px(check.number) - step / 2
            changed = in_one_line(check.build.changes) if check.build.changes else ""
            title = html.escape(
                f"{check.build.name} ({check.build.label}) from check {check.number}"
                + (f": {changed}" if changed else "")
            )
            out.append(
                f'<g class="build-change"><title>{title}</title>'
                f'<line x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{bottom}" stroke="#888" '
                'stroke-dasharray="4 3"/>'
                f'<text class="build-name" x="{x + 3:.1f}" y="{TOP + 12}" font-size="11" fill="#555">'
                f"{check.build.name}</text></g>"
            )
            previous = check.build
    out += ["</g>", '<g class="points">']
    for check in drift.checks:
        verdict = check.line["verdict"]
        colour = VERDICT_COLOURS.get(verdict, "#555555")
        y = y_of(float(len(check.line["touched"])), y_max)
        out.append(
            f'<circle class="point verdict-{verdict.lower()}" cx="{px(check.number):.1f}" cy="{y:.1f}" r="5" '
            f'fill="{colour}"><title>{html.escape(_point_title(check))}</title></circle>'
        )
    out += ["</g>", "</svg>"]
    return "\n".join(out)
