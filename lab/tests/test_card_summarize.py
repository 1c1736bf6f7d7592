"""lab/card/summarize.py, the GPU host campaign's summary: its verdict lines, capacity and recipe tables
and refusals, read from folders laid out as the GPU checks' runner writes them. Where a verdict's summary
matters, it comes from a real `bitexact` run of the flake's battery plan (checks/plans/e2e-tiny-hybrid.json)
against a real HTTP server in SGLang 0.5.20's shapes (checkhelpers.canned_sglang), on an H200 as the NVML
stand-in describes it (checkhelpers.driver_standins)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from checkhelpers.battery_plan import BATTERIES, RECIPE, card_env, run_references
from checkhelpers.battery_plan import run_bitexact as bitexact
from checkhelpers.canned_sglang import CannedSGLang
from gpuchecks.plan import fill

from lab.card import summarize

RADIX = [b for b in BATTERIES if b.get("radix")]


@pytest.fixture(scope="module")
def card(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment under which bitexact reads an H200 through NVML (the stand-in driver)."""
    return card_env(tmp_path_factory.mktemp("driver"))


@pytest.fixture(scope="module")
def references(tmp_path_factory: pytest.TempPathFactory, card: dict[str, str]) -> dict[str, Path]:
    """The plan's own reference commands against a server that does not speculate (the no-spec side)."""
    with CannedSGLang("normal") as server:
        return run_references(server.url, tmp_path_factory.mktemp("references"), card)


def test_the_summary_line_of_a_radix_battery(card: dict[str, str], tmp_path: Path) -> None:
    """summarize.py's line for a warm run, from the run's own --json summary as the runner records it."""
    battery = next(b for b in RADIX if b["name"] == "gpu-radix-cold-warm")
    with CannedSGLang("radix") as server:
        values = {"URL": f"sglang+{server.url}", "RECIPE": str(RECIPE), "OUT": str(tmp_path)}
        command = fill(battery["commands"][0], values)
        done = bitexact(command, tmp_path, card)
    result = {"command": command, "exit": done.returncode, "summary": json.loads(done.stdout)}
    entry = {"name": battery["name"], "variant": "radix", "exit": done.returncode, "results": [result]}
    (tmp_path / "verdicts.jsonl").write_text(json.dumps(entry) + "\n")
    (line,) = summarize.verdict_lines(tmp_path)
    assert line.startswith("gpu-radix-cold-warm") and "EQUAL/OK" in line
    # 22 of the 24 prompts, twice: en-short-fact and en-count are shorter than --min-prompt-tokens 65
    assert [p["prompt_id"] for p in result["summary"]["left_out"]] == ["en-short-fact", "en-count"]
    assert "warm (plain): 44/44 answers equal to the cold pass, each warm one " in line
    assert "; 2 prompts left out, under 65 tokens: en-short-fact (" in line  # the summary says so too


def test_the_capacity_table_says_which_settings_moved_answers_per_tree(
    references: dict[str, Path], card: dict[str, str], tmp_path: Path
) -> None:
    """Two trees as the e2e runner records them (verdicts.jsonl), from real bitexact runs: one whose
    server answers alike (EQUAL everywhere), one whose bits moved under the capacity settings (MOVED,
    logprobs only), both against the reference and against the tree's recipe server."""
    capacity = [b for b in BATTERIES if b.get("capacity")]
    recipe_runs = [b for b in BATTERIES if b["name"] in ("gpu-parity-recipe", "gpu-parity-long")]
    for tree in ("patched", "stock"):  # the recipe's settings: answers alike on both trees
        with CannedSGLang("spec") as server:
            values = {"URL": f"sglang+{server.url}", "RECIPE": str(RECIPE)}
            values |= {"REF": str(references["short"]), "REF_LONG": str(references["long"])}
            for battery in recipe_runs:
                values["OUT"] = str(tmp_path / tree / battery["name"])
                values["REF"] = str(references[battery["reference"]])
                for command in battery["commands"]:
                    assert bitexact(fill(command, values), tmp_path, card).returncode == 0
    for tree, behaviour in (("patched", "spec"), ("stock", "drift")):
        with CannedSGLang(behaviour) as server:
            values = {"URL": f"sglang+{server.url}", "RECIPE": str(RECIPE)}
            values |= {"REF": str(references["short"]), "REF_LONG": str(references["long"])}
            lines = []
            for battery in capacity:
                values["OUT"] = str(tmp_path / tree / battery["name"])  # as the runner lays it out
                results = []
                for command in battery["commands"]:
                    done = bitexact(fill(command, values), tmp_path, card)
                    results.append(
                        {"command": command, "exit": done.returncode, "summary": json.loads(done.stdout)}
                    )
                worst = max(r["exit"] for r in results)
                lines.append(
                    json.dumps(
                        {
                            "name": battery["name"],
                            "variant": battery["variant"],
                            "exit": worst,
                            "results": results,
                        }
                    )
                )
        (tmp_path / tree / "verdicts.jsonl").write_text("\n".join(lines) + "\n")
    table = summarize.capacity_table(summarize.by_tree([tmp_path / "patched", tmp_path / "stock"]))
    assert table[0] == "| setting | value | patched | stock |"
    rows = {tuple(row.split(" | ")[:2]): row for row in table[2:]}
    assert len(rows) == len(capacity) == 6
    short = len(json.loads(references["short"].read_text())["prompts"])
    long = len(json.loads(references["long"].read_text())["prompts"])
    assert rows[("| `--max-running-requests`", "1")].endswith(
        f"| EQUAL {short}/{short} | MOVED {short}/{short} |"
    )
    chunk = rows[("| `--chunked-prefill-size`", "4096")]
    patched = f"EQUAL {short}/{short} + long: EQUAL {long}/{long}"
    assert chunk.endswith(f"| {patched} | MOVED {short}/{short} + long: MOVED {long}/{long} |")
    against = {
        tuple(r.split(" | ")[:2]): r
        for r in summarize.recipe_table(summarize.by_tree([tmp_path / "patched", tmp_path / "stock"]))
    }
    assert against[("| `--max-running-requests`", "32")].endswith(
        f"| EQUAL {short}/{short} | MOVED {short}/{short} |"
    )
    chunk = against[("| `--chunked-prefill-size`", "16384")]
    assert chunk.endswith(f"| {patched} | MOVED {short}/{short} + long: MOVED {long}/{long} |")


def test_several_folders_of_one_tree_make_one_column_from_the_folder_that_ran_each(tmp_path: Path) -> None:
    """A campaign's streams write one folder each (OUT/e2e/patched, OUT/e2e-capacity/patched): the table
    reads each battery's verdict from the folder that ran it, and one that ran twice shows both runs. On
    2026-12-03 the folders were keyed by name alone, so the last folder's verdicts filled every column."""

    def verdict(name: str, equal: int) -> str:
        summary = {"verb": "golden check", "prompts": 24, "equal": equal, "tokens_differ": 0}
        return json.dumps(
            {"name": name, "exit": 0 if equal == 24 else 1, "results": [{"exit": 0, "summary": summary}]}
        )

    first, second = tmp_path / "e2e" / "patched", tmp_path / "e2e-capacity" / "patched"
    for folder, lines in (
        (first, [verdict("gpu-capacity-max-running-1", 24), verdict("gpu-capacity-max-seqs-32", 24)]),
        (
            second,
            [verdict("gpu-capacity-cuda-graph-decode-bs-1", 24), verdict("gpu-capacity-max-seqs-32", 20)],
        ),
    ):
        folder.mkdir(parents=True)
        (folder / "verdicts.jsonl").write_text("\n".join(lines) + "\n")
    assert summarize.by_tree([first, second, first]) == {"patched": [first, second]}  # named twice: once
    table = summarize.capacity_table(summarize.by_tree([first, second]))
    assert table[0] == "| setting | value | patched |"
    rows = {tuple(row.split(" | ")[:2]): row for row in table[2:]}
    assert rows[("| `--max-running-requests`", "1")].endswith("| EQUAL 24/24 |")
    assert rows[("| `--max-running-requests`", "32")].endswith("| ran 2 times: EQUAL 24/24 / MOVED 4/24 |")
    assert rows[("| `--cuda-graph-max-bs-decode`", "1")].endswith("| EQUAL 24/24 |")
    assert rows[("| `--cuda-graph-max-bs-decode`", "32")].endswith("| not run |")
    assert rows[("| `--chunked-prefill-size`", "4096")].endswith("| not run |")


def test_summarize_names_a_folder_without_verdicts_and_the_tree_folders_inside_it(tmp_path: Path) -> None:
    """OUT/e2e given for OUT/e2e/patched once ended in a traceback; now every folder is checked before
    anything prints, and the error names the tree folders the given one holds."""
    tree = tmp_path / "e2e" / "patched"
    tree.mkdir(parents=True)
    (tree / "verdicts.jsonl").write_text(
        json.dumps({"name": "gpu-parity-recipe", "exit": 0, "results": []}) + "\n"
    )
    result = subprocess.run(
        [sys.executable, "-m", "lab.card.summarize", str(tree), str(tmp_path / "e2e")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and result.stdout == ""
    assert f"{tmp_path / 'e2e'} has no verdicts.jsonl" in result.stderr
    assert f"it holds {tmp_path / 'e2e'}/patched" in result.stderr


def test_summarize_marks_an_error_that_a_rerun_superseded(tmp_path: Path) -> None:
    (tmp_path / "verdicts.jsonl").write_text(
        json.dumps({"name": "gpu-repeat", "exit": 2, "error": "the recipe server did not start"})
        + "\n"
        + json.dumps({"name": "gpu-repeat", "exit": 0, "results": []})
        + "\n"
    )
    first, last = summarize.verdict_lines(tmp_path)
    assert "ERROR (2)" in first and first.endswith("[superseded: run again below]")
    assert "EQUAL/OK" in last and "superseded" not in last
