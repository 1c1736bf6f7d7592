"""The markdown report of a comparison (parity, golden check) or a repeat run."""

from __future__ import annotations

from typing import Any


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def _side(name: str, side: dict[str, Any]) -> list[str]:
    lines = [
        f"- **{name}**: `{side['engine']}`"
        + (f" (variant `{side['variant']}`)" if side.get("variant") else "")
    ]
    spec = side.get("spec")
    if spec:
        lines.append(
            f"  - speculation required: {spec['required']}; ran in {spec['ran']}/{spec['prompts']} prompts"
            + (
                f", mean accept length {spec['mean_accept_length']:.3f}"
                if spec.get("mean_accept_length")
                else ""
            )
        )
    ident = side.get("identity") or {}
    if ident:
        lines.append(
            "  - identity: " + ", ".join(f"{k}={_fmt(v)}" for k, v in ident.items() if k != "launch_command")
        )
    return lines


def comparison_markdown(summary: dict[str, Any]) -> str:
    comps = summary["comparisons"]
    differ = [c for c in comps if not c["equal"]]
    lines = [
        f"# {summary['title']}",
        "",
        f"**{summary['equal']}/{summary['prompts']} prompts equal** in every token id, logprob and top-"
        f"{summary['settings']['top_logprobs']} alternative "
        f"({summary['tokens_differ']} differ in token ids).",
        "",
        *_side("A", summary["a"]),
        *_side("B", summary["b"]),
        f"- settings: {summary['settings']}",
        "",
    ]
    if differ:
        lines += [
            "## Divergences",
            "",
            "Position counts generated tokens from 0; margin is top-1 minus top-2 logprob at that position.",
            "",
            "| prompt | first divergence | first token divergence | token A / B | logprob A / B "
            "| margin A / B | margin at token divergence A / B |",
            "|---|---|---|---|---|---|---|",
        ]
        for c in differ:
            lines.append(
                f"| {c['prompt_id']} | {_fmt(c['first_divergence'])} | {_fmt(c['first_token_divergence'])} "
                f"| {_fmt(c['token_a'])} / {_fmt(c['token_b'])} "
                f"| {_fmt(c['logprob_a'])} / {_fmt(c['logprob_b'])} "
                f"| {_fmt(c['margin_a'])} / {_fmt(c['margin_b'])} "
                f"| {_fmt(c['token_margin_a'])} / {_fmt(c['token_margin_b'])} |"
            )
        lines.append("")
    return "\n".join(lines)


def repeat_markdown(summary: dict[str, Any]) -> str:
    lines = [
        f"# {summary['title']}",
        "",
        f"**{summary['divergent']}/{summary['compared']} repeats differ from the first** "
        f"({summary['repeats']} requests per prompt in groups of {summary['batch']}, "
        f"{len(summary['per_prompt'])} prompts).",
        "",
        f"- engine: `{summary['engine']}`",
        "",
        "| prompt | repeats differing | first divergence positions |",
        "|---|---|---|",
    ]
    for row in summary["per_prompt"]:
        positions = sorted({p for p in row["positions"] if p is not None})
        lines.append(
            f"| {row['prompt_id']} | {row['divergent']}/{row['compared']} | {positions[:10] or '-'} |"
        )
    return "\n".join(lines) + "\n"
