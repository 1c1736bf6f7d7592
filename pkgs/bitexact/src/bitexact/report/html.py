"""Self-contained HTML reports (no scripts, no network), one per verb, with inline SVG plots whose x axis
runs over the whole range (to max_new_tokens for positions), with ticks on both axes."""

from __future__ import annotations

import html
from collections import Counter
from typing import Any

from bitexact.report.fmt import compared_text, identity_text, quoted, settings_text, text
from bitexact.report.markdown import (
    BENCH_HEADER,
    DIVERGENCE_HEADER,
    DIVERGENCE_NOTE,
    NOT_ARGMAX_HEADER,
    NOT_ARGMAX_NOTE,
    RECORD_HEADER,
    REPEAT_HEADER,
    bench_rows,
    bench_verdict,
    divergence_rows,
    not_argmax_rows,
    record_rows,
    reference_lines,
    repeat_rows,
    repeat_split,
    verdict_word,
)
from bitexact.report.svg import Point, Series, scatter, series_plot

# Cells break only inside a word that does not fit (long URLs, identities), never a short word letter by
# letter; header cells never break; a table wider than the page scrolls in its own box.
STYLE = """body{font-family:sans-serif;max-width:72em;margin:2em auto;padding:0 1em}
td,th{border:1px solid #ccc;padding:2px 6px;text-align:left;vertical-align:top;overflow-wrap:break-word}
th{white-space:nowrap}table{border-collapse:collapse;margin:1em 0;font-size:.92em}
.wide{overflow-x:auto}
table.sides td:nth-child(-n+3){white-space:nowrap}
table.sides td:last-child{word-break:break-word;min-width:20em}
code{background:#f3f3f3;padding:0 2px}.verdict{font-size:1.15em}
.legend span{margin-right:1.5em}.dot{font-size:1.2em}"""


def esc(value: Any) -> str:
    return html.escape(value if isinstance(value, str) else text(value))


def table(header: list[str], rows: list[list[str]], css: str) -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>" for row in rows)
    # A table wider than the page (the divergence table's ten columns) scrolls by itself, not the page.
    markup = f'<table class="{css}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
    return f'<div class="wide">{markup}</div>'


def page(title: str, body: str) -> str:
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>
<style>{STYLE}</style></head>
<body><h1>{esc(title)}</h1>
{body}
</body></html>
"""


def _engine(summary: dict[str, Any]) -> str:
    identity = identity_text(summary.get("identity") or {})
    return f"<p>Engine: <code>{esc(summary['engine'])}</code>; identity: {esc(identity)}</p>"


def legend(items: list[tuple[str, str]]) -> str:
    spans = "".join(
        f'<span><span class="dot" style="color:{c}">&#9679;</span> {esc(t)}</span>' for c, t in items
    )
    return f'<p class="legend">{spans}</p>'


def divergence_plot(comparisons: list[dict[str, Any]], max_new_tokens: int) -> str:
    """First divergence position (x, 0 to max_new_tokens) against the top-1/top-2 margin there (y)."""
    points = []
    for c in comparisons:
        if c["equal"]:
            continue
        m = c["margin_a"] if c["margin_a"] is not None else c["margin_b"]
        label = f"{c['prompt_id']}: position {text(c['first_divergence'])}, margin {text(m)}"
        kind = "token-diverged" if not c["tokens_equal"] else "logprob-diverged"
        points.append(Point(float(c["first_divergence"]), float(m or 0.0), label, kind))
    if not points:
        return "<p>No divergences: nothing to plot.</p>"
    top = max((p.y for p in points), default=0.0)
    svg = scatter(
        points,
        x_max=max(max_new_tokens, int(max(p.x for p in points))),
        y_max=top if top > 0 else 1.0,
        x_label="first divergence (generated token position)",
        y_label="top-1/top-2 margin there",
    )
    return svg + legend([("#c0392b", "token ids differ"), ("#2c7fb8", "same ids; logprobs or top-k differ")])


def _sides(summary: dict[str, Any]) -> str:
    rows = []
    for name in ("a", "b"):
        side = summary[name]
        spec = side.get("spec")
        rows.append(
            [
                name.upper(),
                side["engine"],
                text(side.get("variant")),
                "-" if not spec else f"required {spec['required']}, ran in {spec['ran']}/{spec['prompts']}",
                identity_text(side.get("identity") or {}),
            ]
        )
    return table(["side", "engine", "variant", "speculation", "identity"], rows, "sides")


def _contexts(comparisons: list[dict[str, Any]]) -> str:
    rows = [
        [
            c["prompt_id"],
            text(c["first_divergence"]),
            quoted(c["context"]["before"]),
            quoted(c["context"]["a"]),
            quoted(c["context"]["b"]),
        ]
        for c in comparisons
        if c.get("context")
    ]
    if not rows:
        return ""
    return "<h2>Text at the first divergence</h2>" + table(
        ["prompt", "position", "before", "A from there", "B from there"], rows, "contexts"
    )


def comparison_html(summary: dict[str, Any]) -> str:
    comps = summary["comparisons"]
    settings = summary["settings"]
    rows = divergence_rows(comps)
    per_prompt = [
        [
            c["prompt_id"],
            text(c["equal"]),
            text(c["first_divergence"]),
            text(c["first_token_divergence"]),
            text(c["margin_a"]),
            text(c["margin_b"]),
        ]
        for c in comps
    ]
    verdict = f"{verdict_word(summary['differ'] == 0)}: {summary['equal']}/{summary['prompts']} prompts equal"
    body = f"""<p class="verdict"><b>{verdict}</b> ({summary["tokens_differ"]} differ in token ids).
Compared: {esc(compared_text(summary["compared_values"]))}.</p>
{_sides(summary)}
<p>Settings: {esc(settings_text(settings))}</p>
<h2>First divergence and margin</h2>
{divergence_plot(comps, int(settings["max_new_tokens"]))}
"""
    if rows:
        body += f"<h2>Divergences</h2><p>{esc(DIVERGENCE_NOTE)}</p>" + table(
            DIVERGENCE_HEADER, rows, "divergences"
        )
    inconsistent = not_argmax_rows(summary)
    if inconsistent:
        body += (
            f"<h2>Chosen tokens that are not the engine's reported argmax</h2><p>{esc(NOT_ARGMAX_NOTE)}</p>"
        )
        body += table(NOT_ARGMAX_HEADER, inconsistent, "not-argmax")
    body += _contexts(comps)
    body += "<h2>Per prompt</h2>" + table(
        ["prompt", "equal", "first divergence", "first token divergence", "margin A", "margin B"],
        per_prompt,
        "per-prompt",
    )
    return page(summary["title"], body)


def repeat_html(summary: dict[str, Any]) -> str:
    max_new = int(summary["settings"]["max_new_tokens"])
    counts = Counter(p for row in summary["per_prompt"] for p in row["positions"] if p is not None)
    points = [
        Point(float(pos), float(n), f"{n} repeats first differ at position {pos}", "measured")
        for pos, n in sorted(counts.items())
    ]
    plot = (
        scatter(
            points,
            x_max=max(max_new, max(counts)),
            y_max=float(max(counts.values())),
            x_label="first divergence from the first answer (generated token position)",
            y_label="repeats first differing there",
            y_integer=True,
        )
        if points
        else "<p>No repeat differs from the first: nothing to plot.</p>"
    )
    rows = repeat_rows(summary["per_prompt"])
    verdict = (
        f"{verdict_word(summary['divergent'] == 0)}: "
        f"{summary['divergent']}/{summary['compared']} repeats differ from the first"
    )
    body = f"""<p class="verdict"><b>{verdict}</b> ({esc(repeat_split(summary))};
{summary["repeats"]} requests per prompt in groups of {summary["batch"]}, {len(rows)} prompts).
Compared: {esc(compared_text(summary["compared_values"]))}.</p>
{_engine(summary)}
<p>Settings: {esc(settings_text(summary["settings"]))}</p>
<h2>Where repeats first differ</h2>
{plot}
<h2>Per prompt</h2>
{table(REPEAT_HEADER, rows, "per-prompt")}"""
    return page(summary["title"], body)


REFERENCE_COLOURS = ("#e67e22", "#8e44ad", "#27ae60", "#7f8c8d", "#c0392b")


def reference_series(reference: dict[str, Any] | None) -> list[Series]:
    """The recipe's quoted decode figures (decodeTokensPerSecond: promptTokens and one list per engine)."""
    figures = (reference or {}).get("decodeTokensPerSecond") or {}
    lengths = figures.get("promptTokens") or []
    named = [(n, v) for n, v in figures.items() if n != "promptTokens" and isinstance(v, list)]
    return [
        Series(f"{name} (recipe)", dict(zip(lengths, map(float, values), strict=False)), colour, hollow=True)
        for (name, values), colour in zip(named, REFERENCE_COLOURS * 3, strict=False)
    ]


def bench_html(summary: dict[str, Any]) -> str:
    rows = summary["rows"]
    plot = "<p>No timed runs.</p>"
    if rows:
        measured = Series(
            "measured", {int(r["prompt_tokens"]): float(r["decode_tps"]) for r in rows}, "#2c7fb8"
        )
        references = reference_series(summary.get("reference"))
        plot = series_plot([measured, *references], x_label="prompt tokens", y_label="decode tokens/s")
        if references:
            plot += legend(
                [
                    ("#2c7fb8", "measured here (filled)"),
                    ("#e67e22", "the recipe's quoted figures (rings, dashed)"),
                ]
            )
    reference = "".join(f"<p>{esc(line)}</p>" for line in reference_lines(summary.get("reference")) if line)
    short = (
        " Runs flagged short returned fewer tokens than asked (--allow-short)."
        if any(r.get("short") for r in rows)
        else ""
    )
    body = f"""<p class="verdict"><b>{esc(bench_verdict(summary))}</b> Single stream, greedy;
the median of the timed runs per length.{short}</p>
{_engine(summary)}
<h2>Decode rate by prompt length</h2>
{plot}
{table(BENCH_HEADER, bench_rows(rows), "bench")}
{reference}"""
    return page(summary["title"], body)


def record_html(summary: dict[str, Any]) -> str:
    rows = record_rows(summary["rows"])
    spec = summary["spec"]
    body = f"""<p class="verdict"><b>RECORDED: {summary["prompts"]} prompts</b> to
<code>{esc(summary["path"])}</code>
(card <code>{esc(summary["card"])}</code>, recipe <code>{esc(summary["recipe"])}</code>, variant
<code>{esc(summary["variant"])}</code>).</p>
<p>Engine: <code>{esc(summary["engine"])}</code>; speculation required {esc(spec["required"])}, ran in
{spec["ran"]}/{spec["prompts"]} prompts; identity: {esc(identity_text(summary.get("identity") or {}))}</p>
<p>Settings: {esc(settings_text(summary["settings"]))}</p>
{table(RECORD_HEADER, rows, "recorded")}"""
    return page(summary["title"], body)
