"""The report of a warm run (`bitexact warm`): its passes, what each was compared with, the prompt
tokens each answer took from the cache, and the prompts left out (--min-prompt-tokens)."""

from __future__ import annotations

from typing import Any

from bitexact.report.fmt import compared_text, identity_text, settings_text, text
from bitexact.report.markdown import table, verdict_word


def _pass_rows(summary: dict[str, Any]) -> list[list[str]]:
    return [
        [
            p["name"],
            str(p["inflight"]),
            p["compared_with"] or "-",
            "-" if p["equal"] is None else f"{p['equal']}/{summary['prompts']}",
            text(p["tokens_differ"]),
            f"{text(p['hits_min'])} to {text(p['hits_max'])}",
            ", ".join(p["without_hits"]) or "-",
        ]
        for p in summary["passes"]
    ]


def _left_out_line(summary: dict[str, Any]) -> list[str]:
    """Which prompts were sent and not compared, with their counts; nothing without the option."""
    minimum = summary.get("min_prompt_tokens")
    if minimum is None:
        return []
    left = summary.get("left_out") or []
    if not left:
        return [f"- left out: none (every prompt has --min-prompt-tokens {minimum} or more prompt tokens)"]
    names = ", ".join(f"{p['prompt_id']} ({p['prompt_tokens']} tokens)" for p in left)
    return [
        f"- left out: {len(left)} prompts shorter than --min-prompt-tokens {minimum} (their token ids, else "
        f"the server's count in the cold pass; sent, not compared, not held to the hit checks): {names}"
    ]


def warm_markdown(summary: dict[str, Any]) -> str:
    passes = [p["name"] for p in summary["passes"]]
    lines = [
        f"# {summary['title']}",
        "",
        f"**{verdict_word(summary['differ'] == 0)}: {summary['equal']}/{summary['compared']} answers equal "
        f"to the {summary['reference']}**. Compared: {compared_text(summary['compared_values'])}.",
        "",
        f"- engine: `{summary['engine']}`",
        f"- identity: {identity_text(summary.get('identity') or {})}",
        f"- settings: {settings_text(summary['settings'])}",
        f"- prompts: {summary['prompts']}"
        + (
            f" compared of {summary['prompts_sent']} sent"
            if summary.get("prompts_sent", summary["prompts"]) != summary["prompts"]
            else ""
        )
        + (f"; shared prefix {summary['prefix_alignment']}" if summary.get("prefix_alignment") else ""),
        *_left_out_line(summary),
        f"- cache flush: {text(summary['flush'])}",
        *(f"- refused: {reason}" for reason in summary["refused"]),
        "",
        "## Passes",
        "",
        *table(
            [
                "pass",
                "in flight",
                "compared with",
                "equal",
                "differ in token ids",
                "cached tokens",
                "no hits",
            ],
            _pass_rows(summary),
        ),
        "",
        "## Cached prompt tokens per prompt",
        "",
        *table(
            ["prompt", "prompt tokens", *passes],
            [
                [row["prompt_id"], text(row["prompt_tokens"]), *(text(row[name]) for name in passes)]
                for row in summary["hits"]
            ],
        ),
        "",
    ]
    return "\n".join(lines)
