"""The markdown reports: a comparison (parity, golden check), a repeat run, a bench run, a golden record."""

from __future__ import annotations

from typing import Any

from bitexact.report.fmt import compared_text, identity_text, pair, quoted, settings_text, text, ulps

DIVERGENCE_NOTE = (
    "Position counts generated tokens from 0; margin is top-1 minus top-2 logprob at that position; "
    "values are exact (the shortest decimal that reads back to the same double); delta is |A - B| and "
    "ULPs the number of representable floats between them (in float32 where both values are float32)."
)


def _spec_line(spec: dict[str, Any]) -> str:
    line = f"speculation required: {spec['required']}; ran in {spec['ran']}/{spec['prompts']} prompts"
    if spec.get("mean_accept_length") is not None:
        line += f", mean accept length {spec['mean_accept_length']:.3f}"
    return line


def _side(name: str, side: dict[str, Any]) -> list[str]:
    lines = [
        f"- **{name}**: `{side['engine']}`"
        + (f" (variant `{side['variant']}`)" if side.get("variant") else "")
    ]
    if side.get("spec"):
        lines.append(f"  - {_spec_line(side['spec'])}")
    if side.get("identity"):
        lines.append(f"  - identity: {identity_text(side['identity'])}")
    return lines


def divergence_rows(comparisons: list[dict[str, Any]]) -> list[list[str]]:
    """The cells of the divergence table, shared by the markdown and HTML reports."""
    return [
        [
            str(c["prompt_id"]),
            text(c["first_divergence"]),
            text(c.get("differs_in")),
            text(c["first_token_divergence"]),
            pair(c["token_a"], c["token_b"]),
            pair(c["logprob_a"], c["logprob_b"]),
            text(c.get("logprob_delta")),
            ulps(c.get("logprob_ulps"), c.get("ulp_format")),
            pair(c["margin_a"], c["margin_b"]),
            pair(c["token_margin_a"], c["token_margin_b"]),
        ]
        for c in comparisons
        if not c["equal"]
    ]


DIVERGENCE_HEADER = [
    "prompt",
    "first divergence",
    "what differs there",
    "first token divergence",
    "token A / B",
    "logprob A / B",
    "abs delta",
    "ULPs",
    "margin A / B",
    "margin at token divergence A / B",
]


NOT_ARGMAX_NOTE = (
    "Greedy decoding chooses the argmax, yet at these positions the answer's chosen token is not the argmax "
    "its own top-k reports. below: another token has a higher logprob, so the engine chose by other bits "
    "than those it reports (a speculative server's verify step against a one-token decode), a difference in "
    "its numerics; tie: another token has the same logprob and is listed first; ignored: the higher one is "
    "a token the request kept from being chosen (the end-of-sequence token under ignore_eos), as expected. "
    "The answers were compared as they are."
)
NOT_ARGMAX_HEADER = [
    "side",
    "prompt",
    "position",
    "kind",
    "chosen token",
    "its logprob",
    "reported argmax",
    "argmax logprob",
]


def not_argmax_rows(summary: dict[str, Any]) -> list[list[str]]:
    """The cells of the table of chosen tokens that are not their engine's reported argmax."""
    return [
        [
            str(f["side"]),
            str(f["prompt_id"]),
            text(f["position"]),
            str(f["kind"]),
            text(f["chosen"]),
            text(f["chosen_logprob"]),
            text(f["argmax"]),
            text(f["argmax_logprob"]),
        ]
        for f in summary.get("not_argmax") or []
    ]


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    cell = lambda s: s.replace("|", "\\|")  # noqa: E731
    return [
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
        *("| " + " | ".join(cell(c) for c in row) + " |" for row in rows),
    ]


def _code(s: str) -> str:
    fence = "``" if "`" in s else "`"
    return f"{fence} {s} {fence}" if fence == "``" else f"`{s}`"


def verdict_word(equal: bool) -> str:
    """The word every report leads with."""
    return "EQUAL" if equal else "DIFFERENT"


def comparison_markdown(summary: dict[str, Any]) -> str:
    comps = summary["comparisons"]
    rows = divergence_rows(comps)
    lines = [
        f"# {summary['title']}",
        "",
        f"**{verdict_word(summary['differ'] == 0)}: {summary['equal']}/{summary['prompts']} prompts equal** "
        f"({summary['tokens_differ']} differ in token ids). "
        f"Compared: {compared_text(summary['compared_values'])}.",
        "",
        *_side("A", summary["a"]),
        *_side("B", summary["b"]),
        f"- settings: {settings_text(summary['settings'])}",
        "",
    ]
    if rows:
        lines += ["## Divergences", "", DIVERGENCE_NOTE, "", *table(DIVERGENCE_HEADER, rows), ""]
    inconsistent = not_argmax_rows(summary)
    if inconsistent:
        lines += [
            "## Chosen tokens that are not the engine's reported argmax",
            "",
            NOT_ARGMAX_NOTE,
            "",
            *table(NOT_ARGMAX_HEADER, inconsistent),
            "",
        ]
    texts = [c for c in comps if c.get("context")]
    if texts:
        lines += ["## Text at the first divergence", ""]
        for c in texts:
            ctx = c["context"]
            lines += [
                f"- **{c['prompt_id']}** at position {c['first_divergence']} "
                f"(text from position {ctx['from_position']}):",
                f"  - before: {_code(quoted(ctx['before']))}",
                f"  - A: {_code(quoted(ctx['a']))}",
                f"  - B: {_code(quoted(ctx['b']))}",
            ]
        lines.append("")
    return "\n".join(lines)


def repeat_markdown(summary: dict[str, Any]) -> str:
    lines = [
        f"# {summary['title']}",
        "",
        f"**{verdict_word(summary['divergent'] == 0)}: {summary['divergent']}/{summary['compared']} repeats "
        f"differ from the first** ({repeat_split(summary)}; {summary['repeats']} requests per prompt in "
        f"groups of {summary['batch']}, {len(summary['per_prompt'])} prompts). "
        f"Compared: {compared_text(summary['compared_values'])}.",
        "",
        f"- engine: `{summary['engine']}`",
        f"- identity: {identity_text(summary.get('identity') or {})}",
        f"- settings: {settings_text(summary['settings'])}",
        "",
    ]
    lines += table(REPEAT_HEADER, repeat_rows(summary["per_prompt"]))
    return "\n".join(lines) + "\n"


def repeat_split(summary: dict[str, Any]) -> str:
    """What differed: token ids, or only logprobs / top-k alternatives."""
    tokens = int(summary.get("token_divergent", 0))
    return f"{tokens} in token ids, {summary['divergent'] - tokens} in logprobs or top-k only"


REPEAT_HEADER = [
    "prompt",
    "repeats differing",
    "in token ids",
    "in logprobs only",
    "first divergence positions",
]


def repeat_rows(per_prompt: list[dict[str, Any]]) -> list[list[str]]:
    """One row per prompt: how many repeats differ, and the first ten distinct positions where they do."""
    rows = []
    for row in per_prompt:
        positions = sorted({p for p in row["positions"] if p is not None})
        shown = ", ".join(str(p) for p in positions[:10]) + (", ..." if len(positions) > 10 else "")
        tokens = int(row.get("token_divergent", 0))
        rows.append(
            [
                str(row["prompt_id"]),
                f"{row['divergent']}/{row['compared']}",
                str(tokens),
                str(row["divergent"] - tokens),
                shown or "-",
            ]
        )
    return rows


BENCH_HEADER = ["prompt tokens", "new tokens", "timed runs", "TTFT s", "decode t/s"]


def bench_rows(rows: list[dict[str, Any]]) -> list[list[str]]:
    return [
        [
            str(r["prompt_tokens"]),
            str(r["new_tokens"]) + (" (short)" if r.get("short") else ""),
            str(r["runs"]),
            f"{r['ttft_s']:.3f}",
            f"{r['decode_tps']:.1f}",
        ]
        for r in rows
    ]


def reference_lines(reference: dict[str, Any] | None) -> list[str]:
    figures = (reference or {}).get("decodeTokensPerSecond") or {}
    if not figures:
        return []
    lines = [f"The recipe's reference, decode t/s at {text(figures.get('promptTokens'))} prompt tokens:", ""]
    lines += [f"- {name}: {text(values)}" for name, values in figures.items() if name != "promptTokens"]
    return lines


def bench_verdict(summary: dict[str, Any]) -> str:
    """MEASURED, or SHORT ANSWERS where a run kept with --allow-short returned fewer tokens than asked."""
    short = [r for r in summary["rows"] if r.get("short")]
    if short:
        return f"SHORT ANSWERS at {', '.join(str(r['prompt_tokens']) for r in short)} prompt tokens:"
    return f"MEASURED: {len(summary['rows'])} prompt lengths."


def bench_markdown(summary: dict[str, Any]) -> str:
    lines = [
        f"# {summary['title']}",
        "",
        f"**{bench_verdict(summary)}** Single stream, greedy; the median of the timed runs per length.",
        "",
        f"- engine: `{summary['engine']}`",
        f"- identity: {identity_text(summary.get('identity') or {})}",
        "",
        *table(BENCH_HEADER, bench_rows(summary["rows"])),
        "",
        *reference_lines(summary.get("reference")),
    ]
    return "\n".join(lines).rstrip() + "\n"


def record_markdown(summary: dict[str, Any]) -> str:
    lines = [
        f"# {summary['title']}",
        "",
        f"**RECORDED: {summary['prompts']} prompts** to `{summary['path']}` "
        f"(card `{summary['card']}`, recipe `{summary['recipe']}`, variant `{summary['variant']}`).",
        "",
        f"- engine: `{summary['engine']}`",
        f"- {_spec_line(summary['spec'])}",
        f"- identity: {identity_text(summary.get('identity') or {})}",
        f"- settings: {settings_text(summary['settings'])}",
        "",
        *table(RECORD_HEADER, record_rows(summary["rows"])),
    ]
    return "\n".join(lines) + "\n"


RECORD_HEADER = ["prompt", "prompt tokens", "generated tokens", "first tokens"]


def record_rows(rows: list[dict[str, Any]]) -> list[list[str]]:
    return [
        [str(r["prompt_id"]), text(r["prompt_tokens"]), str(r["generated"]), r["first_tokens"]] for r in rows
    ]
