"""Summarise the result folders of the end-to-end runs in docs/evidence up to 2026-12-03 (OUT/e2e/<tree>/, as
the runner before bitexact-gpu-checks wrote them): one line per battery (verdict, prompts equal/differing,
token ids differing), the speculation the server reported in the checks' results (verify steps, drafts
accepted of proposed, mean accept length per prompt, prompts with partial acceptance), and the capacity
tables: which server setting moved answers away from the no-spec reference, and away from the same tree's
recipe server at the recipe's own settings (speculation on in both, so that a tree whose speculation alone
moves answers is still measured on capacity), per tree. Several result folders of one tree (a campaign's
streams) make one column: each cell comes from the folder that ran the battery, and a battery run in more
than one says so. Standard library only.

Usage: python -m lab.card.summarize OUT/e2e/patched OUT/e2e/stock [OUT/e2e-capacity/patched ...]
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

PLAN = Path(__file__).resolve().parents[2] / "checks" / "plans" / "e2e-tiny-hybrid.json"
RECIPE = Path(__file__).resolve().parents[2] / "nix" / "recipes" / "e2e-tiny-hybrid.json"


def verdict_lines(tree: Path) -> list[str]:
    lines = []
    entries = [json.loads(raw) for raw in (tree / "verdicts.jsonl").read_text().splitlines()]
    for at, entry in enumerate(entries):
        parts = []
        for result in entry.get("results", []):
            summary = result["summary"]
            if isinstance(summary, dict) and summary.get("verb") == "warm":
                line = (
                    f"warm ({summary['mode']}): {summary['equal']}/{summary['compared']} answers equal to "
                    f"the {summary['reference']}, each warm one {summary['warm_hits_min']}+ tokens cached"
                )
                left_out = summary.get("left_out") or []
                if left_out:  # sent, not compared: shorter than the battery's --min-prompt-tokens
                    names = ", ".join(f"{p['prompt_id']} ({p['prompt_tokens']})" for p in left_out)
                    under = summary["min_prompt_tokens"]
                    line += f"; {len(left_out)} prompts left out, under {under} tokens: {names}"
                parts.append(line)
            elif isinstance(summary, dict) and "prompts" in summary:
                what = summary["verb"]
                if "equal" in summary:
                    what += f" {summary['equal']}/{summary['prompts']} equal"
                    if summary.get("tokens_differ"):
                        what += f", token ids differ in {summary['tokens_differ']}"
                else:
                    what += f" {summary['prompts']} prompts"
                parts.append(what)
            elif isinstance(summary, dict) and summary.get("verb") == "repeat":
                parts.append(
                    f"repeat x{summary['repeats']}, {summary['batch']} in flight: "
                    f"{summary['divergent']} of {summary['compared']} runs differ from the first"
                )
            else:
                parts.append(str(summary).splitlines()[0][:120] if summary else "")
        verdict = {0: "EQUAL/OK", 1: "DIFFERS"}.get(entry["exit"], f"ERROR ({entry['exit']})")
        # a rerun ran an errored battery again: the last verdict of a name is the one
        later = any(other["name"] == entry["name"] for other in entries[at + 1 :])
        lines.append(
            f"{entry['name']:<26} {verdict:<9} "
            + "; ".join(parts)
            + (f" {entry['error']}" if "error" in entry else "")
            + (" [superseded: run again below]" if later else "")
        )
    return lines


def spec_lines(tree: Path) -> list[str]:
    lines = []
    for results in sorted(tree.glob("*/*/check-*.jsonl")):
        rows: list[dict[str, Any]] = [json.loads(line) for line in results.read_text().splitlines()][1:]
        specs = [r["generation"].get("spec") or {} for r in rows]
        if not specs or not all("verify_ct" in s for s in specs):
            continue
        lengths = [s["accept_length"] for s in specs]
        accepted = sum(s["correct_drafts"] for s in specs)
        proposed = sum(s["proposed_drafts"] for s in specs)
        every = sum(1 for s in specs if s["correct_drafts"] == s["proposed_drafts"])
        none = sum(1 for s in specs if s["correct_drafts"] == 0)
        steps = sum(s["verify_ct"] for s in specs)
        lines.append(
            f"{results.parent.parent.name:<26} {len(rows)} prompts, {steps} verify steps, drafts accepted "
            f"{accepted}/{proposed}, accept length per prompt mean {sum(lengths) / len(lengths):.2f} "
            f"(min {min(lengths):.2f}, max {max(lengths):.2f}); prompts with every draft accepted {every}, "
            f"none {none}, some {len(specs) - every - none}"
        )
    return lines


def _moved(entry: dict[str, Any] | None) -> str:
    """A capacity battery's cell: EQUAL n/n, or how many prompts moved (and in token ids), or the error."""
    if entry is None:
        return "not run"
    if entry["exit"] not in (0, 1):
        return f"ERROR (exit {entry['exit']})"
    cells = []
    for result in entry.get("results", []):
        summary = result["summary"]
        if not isinstance(summary, dict) or "equal" not in summary:
            return f"ERROR (exit {result['exit']})" if result["exit"] > 1 else "no summary"
        moved = summary["prompts"] - summary["equal"]
        tokens = f", token ids in {summary['tokens_differ']}" if summary.get("tokens_differ") else ""
        cells.append(
            f"EQUAL {summary['equal']}/{summary['prompts']}"
            if moved == 0
            else f"MOVED {moved}/{summary['prompts']}{tokens}"
        )
    return " + long: ".join(cells)


Trees = dict[str, list[Path]]


def by_tree(folders: list[Path]) -> Trees:
    """Result folders grouped by their tree (a folder's name, the old runner's OUT/<tree>), in order."""
    trees: Trees = {}
    for folder in folders:
        same = trees.setdefault(folder.name, [])
        if folder.resolve() not in [f.resolve() for f in same]:  # a folder named twice is read once
            same.append(folder)
    return trees


def _settings_table(trees: Trees, cell: Callable[[list[Path], dict[str, Any]], str]) -> list[str]:
    """Markdown: one row per capacity battery of the plan (its setting and value), one column per tree
    with `cell(that tree's folders, battery)`."""
    plan = json.loads(PLAN.read_text())
    variants = json.loads(RECIPE.read_text())["variants"]
    rows = [
        "| setting | value | " + " | ".join(trees) + " |",
        "|---|---|" + "---|" * len(trees),
    ]
    for battery in (b for b in plan["batteries"] if b.get("capacity")):
        value = variants[battery["variant"]]["set"][battery["capacity"]]
        cells = [cell(folders, battery) for folders in trees.values()]
        rows.append(f"| `{battery['capacity']}` | {value} | " + " | ".join(cells) + " |")
    return rows


def _each_run(cells: list[str]) -> str:
    """One run's cell, or every run's when a battery ran in more than one folder of a tree."""
    if not cells:
        return "not run"
    return cells[0] if len(cells) == 1 else f"ran {len(cells)} times: " + " / ".join(cells)


def capacity_table(trees: Trees) -> list[str]:
    """Against the no-spec reference, from each tree's verdicts (the first check: 24 prompts with
    requests in flight; after `+ long:`, the long prompts, for the chunk sizes)."""
    verdicts = {
        folder: {e["name"]: e for e in map(json.loads, (folder / "verdicts.jsonl").read_text().splitlines())}
        for folders in trees.values()
        for folder in folders
    }

    def cell(folders: list[Path], battery: dict[str, Any]) -> str:
        ran = [verdicts[f][battery["name"]] for f in folders if battery["name"] in verdicts[f]]
        return _each_run([_moved(entry) for entry in ran])

    return _settings_table(trees, cell)


VALUES = ("token_ids", "logprobs", "top_logprobs")


def _generations(folder: Path) -> dict[str, dict[str, Any]]:
    """The values per prompt id in a check's results (bitexact's JSONL: a key line, then one per prompt)."""
    (results,) = sorted(folder.glob("check-*.jsonl"))
    out = {}
    for line in results.read_text().splitlines()[1:]:
        entry = json.loads(line)
        out[entry["id"]] = {k: entry["generation"][k] for k in VALUES}
    return out


def _ran_in(folders: list[Path], run: Path) -> list[Path]:
    """RUN (a battery's run folder, relative) in each of FOLDERS that holds it."""
    return [folder / run for folder in folders if (folder / run).is_dir()]


def against_recipe(folders: list[Path], battery: dict[str, Any]) -> str:
    """A capacity battery's answers against the gpu-parity-recipe battery's (the long prompts': against
    gpu-parity-long's), the recipe's settings on the same tree, value by value: JSON floats read back
    exactly, so equal is bit-equal. Either run may be in any of the tree's folders; more than one of
    either is named, not chosen from."""
    pairs = [(Path("gpu-parity-recipe") / "recipe", Path(battery["name"]) / battery["variant"])]
    if battery.get("longReference"):
        pairs.append(
            (Path("gpu-parity-long") / "recipe", Path(battery["name"]) / f"{battery['variant']}-long")
        )
    cells = []
    for base_run, moved_run_dir in pairs:
        bases, runs = _ran_in(folders, base_run), _ran_in(folders, moved_run_dir)
        if len(bases) > 1 or len(runs) > 1:
            return f"ran more than once ({len(bases)} recipe runs, {len(runs)} of this battery)"
        try:
            base, moved_run = _generations(bases[0]), _generations(runs[0])
        except (IndexError, FileNotFoundError, ValueError):
            return "not run"
        if set(base) != set(moved_run):
            return "prompts differ"
        moved = [p for p in base if base[p] != moved_run[p]]
        tokens = sum(1 for p in moved if base[p]["token_ids"] != moved_run[p]["token_ids"])
        cells.append(
            f"EQUAL {len(base)}/{len(base)}"
            if not moved
            else f"MOVED {len(moved)}/{len(base)}" + (f", token ids in {tokens}" if tokens else "")
        )
    return " + long: ".join(cells)


def recipe_table(trees: Trees) -> list[str]:
    """Against the same tree's recipe server, value by value (`against_recipe`)."""
    return _settings_table(trees, against_recipe)


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    # every folder checked before anything prints: a wrong one is named with its fix, not a traceback
    for name in argv:
        if not (Path(name) / "verdicts.jsonl").is_file():
            trees = sorted(p.parent.name for p in Path(name).glob("*/verdicts.jsonl"))
            hint = f"; it holds {', '.join(f'{name}/{t}' for t in trees)}" if trees else ""
            print(
                f"summarize.py: {name} has no verdicts.jsonl: "
                f"give the old runner's OUT/e2e/<tree> folders{hint}",
                file=sys.stderr,
            )
            return 2
    for name in argv:
        tree = Path(name)
        print(f"== {tree.name} ({tree})")
        print("\n".join(verdict_lines(tree)))
        print("-- speculation reported by the server (meta_info) in the checks")
        print("\n".join(spec_lines(tree)))
    trees = by_tree([Path(name) for name in argv])
    print("== capacity: answers against the no-spec reference, requests in flight")
    print("\n".join(capacity_table(trees)))
    print("== capacity: answers against the same tree's recipe server (speculation on in both)")
    print("\n".join(recipe_table(trees)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
