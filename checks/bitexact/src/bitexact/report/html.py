"""A self-contained HTML report (no network): the markdown content as a table, plus an inline SVG plot of
first-divergence position against the top-1/top-2 margin there."""

from __future__ import annotations

import html
import math
from typing import Any

W, H, PAD = 640, 320, 48


def divergence_plot(comparisons: list[dict[str, Any]]) -> str:
    points = [
        (c["first_divergence"], c["margin_a"] if c["margin_a"] is not None else c["margin_b"], c)
        for c in comparisons
        if not c["equal"]
    ]
    if not points:
        return "<p>No divergences: nothing to plot.</p>"
    max_x = max(p[0] for p in points) or 1
    margins = [p[1] for p in points if p[1] is not None]
    max_y = max(margins, default=1.0) or 1.0
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" role="img" '
        'aria-label="first divergence position vs margin">',
        f'<line x1="{PAD}" y1="{H - PAD}" x2="{W - PAD / 2}" y2="{H - PAD}" stroke="black"/>',
        f'<line x1="{PAD}" y1="{PAD / 2}" x2="{PAD}" y2="{H - PAD}" stroke="black"/>',
        f'<text x="{W / 2}" y="{H - 10}" text-anchor="middle">'
        f"first divergence (generated token index, max {max_x})</text>",
        f'<text x="14" y="{H / 2}" transform="rotate(-90 14 {H / 2})" text-anchor="middle">'
        f"top-1/top-2 margin (max {max_y:.3g})</text>",
    ]
    for x, y, c in points:
        px = PAD + (W - 1.5 * PAD) * (x / max_x)
        py = (H - PAD) - (H - 1.5 * PAD) * ((y if y is not None and not math.isnan(y) else 0.0) / max_y)
        color = "#c0392b" if not c["tokens_equal"] else "#2c7fb8"
        title = html.escape(f"{c['prompt_id']}: position {x}, margin {y}")
        parts.append(
            f'<circle cx="{px:.1f}" cy="{py:.1f}" r="5" fill="{color}"><title>{title}</title></circle>'
        )
    parts.append("</svg>")
    parts.append(
        '<p><span style="color:#c0392b">&#9679;</span> token ids differ &nbsp; '
        '<span style="color:#2c7fb8">&#9679;</span> same ids, logprobs or top-k differ</p>'
    )
    return "\n".join(parts)


def comparison_html(summary: dict[str, Any], markdown: str) -> str:
    rows = "".join(
        "<tr>"
        + "".join(
            f"<td>{html.escape(str(c[k]))}</td>"
            for k in (
                "prompt_id",
                "equal",
                "first_divergence",
                "first_token_divergence",
                "margin_a",
                "margin_b",
            )
        )
        + "</tr>"
        for c in summary["comparisons"]
    )
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{html.escape(summary["title"])}</title>
<style>body{{font-family:sans-serif;max-width:60em;margin:2em auto}}
td,th{{border:1px solid #ccc;padding:2px 6px}}
table{{border-collapse:collapse}}pre{{white-space:pre-wrap;background:#f6f6f6;padding:1em}}</style></head>
<body><h1>{html.escape(summary["title"])}</h1>
<p><b>{summary["equal"]}/{summary["prompts"]} prompts equal</b>
({summary["tokens_differ"]} differ in token ids)</p>
<h2>First divergence and margin</h2>
{divergence_plot(summary["comparisons"])}
<h2>Per prompt</h2>
<table><tr><th>prompt</th><th>equal</th><th>first divergence</th><th>first token divergence</th>
<th>margin A</th><th>margin B</th></tr>{rows}</table>
<h2>Report</h2><pre>{html.escape(markdown)}</pre>
</body></html>
"""
