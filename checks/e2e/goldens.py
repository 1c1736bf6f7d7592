"""Record this card's goldens of the tiny hybrid model and check builds against them (issue 20).

On a GPU host with no network, after assemble.py (and `assemble.py tree` for further trees) and
tiny_model.py. Steps, each writing as it goes under OUT (a rerun skips the steps whose verdict compared
something, and runs an error again):

- `record`: the patched tree's `recipe` server; its build as the launcher prints it (`--build-info`);
  then the record-golden app's commands, the plan's `goldenRecord` (`bitexact golden record URL --recipe R
  --variant recipe --golden-dir DIR --build-info INFO`, for the 24 prompts and again with the long
  prompts, keyed `<recipe>-long`). Each appends a RECORDED line to DIR/<card>/history.jsonl.
- `check:NAME=TREE[:VARIANT]`: start TREE's VARIANT server (default `recipe`) and run the plan's
  `gpu-golden` commands, the flake check's own, with @GOLDEN_DIR@ = DIR and the build as
  BITEXACT_BUILD_INFO / BITEXACT_BUILD_ID give it; each check's history line is appended to
  DIR/<the card it names>/history.jsonl.

Usage (repository root):
    python checks/e2e/goldens.py --work WORK --out OUT --golden-dir DIR record check:restart=patched \\
        check:stock=stock check:flashinfer=patched:backend-flashinfer check:revert-0003=revert-0003
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import batteries  # noqa: E402  (the battery runner's server, environment and bitexact call)
import runner_args as ra  # noqa: E402  (the runners' strict command lines)

REPO = batteries.REPO


def build_info(work: Path, tree: str, recipe: Path, dest: Path) -> Path:
    """The launcher's account of TREE's build (what a history line diffs builds by)."""
    done = subprocess.run(
        [*batteries.launcher("recipe", ["--build-info"], recipe)],
        cwd=REPO,
        env=batteries.base_env(work, tree, recipe),
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise RuntimeError(f"--build-info for the {tree} tree failed: {done.stderr[-2000:]}")
    dest.write_text(done.stdout)
    return dest


def parse_check(text: str) -> tuple[str, str, str] | None:
    """`check:NAME=TREE[:VARIANT]` -> (name, tree, variant), or None for a malformed step. NAME and TREE
    become folders (OUT/NAME, WORK/TREE), so each is one name of the runners' pattern, never a path."""
    body = text.removeprefix("check:")
    name, sep, target = body.partition("=")
    tree, _, variant = target.partition(":")
    if not sep or not name or not tree:
        return None
    if any(not ra.values.NAME.fullmatch(part) for part in (name, tree, variant or "recipe")):
        return None
    return name, tree, variant or "recipe"


@ra.one_line("checks/e2e/goldens.py")
def main(argv: list[str] | None = None) -> int:
    parser = ra.strict_parser(description=__doc__.split("\n\n")[0])
    once = {"action": ra.Once}
    parser.add_argument("--work", type=Path, required=True, help="assemble.py's folder (trees, deps)", **once)
    parser.add_argument("--out", type=Path, required=True, help="reports, logs and verdicts.jsonl", **once)
    parser.add_argument(
        "--golden-dir", type=Path, required=True, help="where the goldens are written", **once
    )
    parser.add_argument(
        "--recipe",
        type=Path,
        default=batteries.RECIPE,
        help="the recipe (default: the e2e tiny hybrid's)",
        **once,
    )
    parser.add_argument("--port", type=ra.port, default=batteries.PORT, **once)
    parser.add_argument("--build-id", default="", help="a name for the build in the history lines", **once)
    parser.add_argument("--mem-fraction-static", type=ra.fraction, help="as batteries.py's option", **once)
    parser.add_argument("--start-timeout", type=ra.seconds, default=600.0, **once)
    parser.add_argument("--long", help="long prompt lengths (default: the plan's)", **once)
    parser.add_argument(
        "--tokenizer", help="the long prompts' tokenizer (default: the recipe model's)", **once
    )
    parser.add_argument("steps", nargs="+", help="record, check:NAME=TREE[:VARIANT]")
    args = parser.parse_args(argv)
    names = ["record" if step == "record" else (parse_check(step) or ("",))[0] for step in args.steps]
    for step in args.steps:  # all of them before any server starts
        if step != "record" and not step.startswith("check:"):
            parser.error(f"unknown step {step!r}: record, or check:NAME=TREE[:VARIANT]")
        if step.startswith("check:") and parse_check(step) is None:
            parser.error(
                f"step {step!r}: write check:NAME=TREE[:VARIANT], e.g. check:stock=stock (NAME, TREE and "
                "VARIANT each letters, digits, . _ + -, starting with a letter or a digit)"
            )
        if names.count(names[args.steps.index(step)]) > 1:
            parser.error(f"step {step!r}: two steps named {names[args.steps.index(step)]!r} share one folder")
        tree = "patched" if step == "record" else parse_check(step)[1]  # type: ignore[index]
        if not (args.work / tree / "sglang").is_dir():
            parser.error(
                f"step {step!r}: no tree {args.work / tree}: assemble.py build makes patched/ and stock/, "
                "assemble.py tree --name NAME any other"
            )

    plan = json.loads(batteries.PLAN.read_text())
    golden_battery = next(b for b in plan["batteries"] if b["name"] == "gpu-golden")
    args.out.mkdir(parents=True, exist_ok=True)
    recipe = args.recipe.resolve()
    if args.mem_fraction_static is not None:
        recipe = batteries.recipe_with_memory(recipe, args.mem_fraction_static, args.out / "recipe.json")
    verdicts = args.out / "verdicts.jsonl"
    done, errored = batteries.earlier_verdicts(verdicts)  # an error is run again, as in batteries.py
    # The long prompts' tokenizer: the model's own.
    model = args.tokenizer or str(REPO / json.loads(recipe.read_text())["model"]["path"])
    lengths = args.long or plan["longLengths"]
    url = f"sglang+http://127.0.0.1:{args.port}"
    build_id = ["--build-id", args.build_id] if args.build_id else []

    for step in args.steps:
        parsed = parse_check(step)
        name, tree, variant = (
            ("record", "patched", "recipe") if step == "record" or parsed is None else parsed
        )
        if name in done:
            batteries.log(f"{name}: verdict already in {verdicts}, skipped")
            continue
        if name in errored:
            batteries.log(f"{name}: its verdict in {verdicts} is an error, run again")
        step_out = args.out / name
        step_out.mkdir(parents=True, exist_ok=True)
        info = build_info(args.work, tree, recipe, step_out / "build-info.json")
        batteries.log(f"{name}: starting the {tree} tree's {variant} server")
        server = batteries.Server(args.work, tree, variant, args.port, step_out / "server.log", recipe)
        results: list[dict[str, Any]] = []
        try:
            ready = server.wait_ready(args.start_timeout)
            batteries.log(f"{name}: ready after {ready:.0f} s")
            values = {
                "URL": url,
                "RECIPE": str(recipe),
                "GOLDEN_DIR": str(args.golden_dir),
                "OUT": str(step_out),
                "BUILD_INFO": str(info),
                "MODEL_SNAPSHOT": model,
            }
            if step == "record":
                # The record-golden app's commands (the plan's goldenRecord: the prompts, then the long
                # prompts keyed <recipe>-long), each with its own report folder and this run's build id.
                commands = [
                    [*batteries.fill(c, values), "--out", str(step_out / out), *build_id]
                    for c, out in zip(plan["goldenRecord"]["commands"], ("short", "long"), strict=True)
                ]
            else:
                commands = [batteries.fill(c, values) for c in golden_battery["commands"]]
            commands = [batteries.with_long(c, lengths) for c in commands]
            if name in errored:  # a golden the failed try wrote is replaced, not refused
                commands = [batteries.rerun_command(c) for c in commands]
            for command in commands:
                env_extra = {"BITEXACT_BUILD_INFO": str(info), "BITEXACT_BUILD_ID": args.build_id or name}
                results.append(
                    batteries.run_bitexact(
                        command, args.work, tree, step_out / "bitexact.log", env_extra=env_extra
                    )
                )
        except RuntimeError as error:
            results.append({"exit": 2, "error": str(error)})
        finally:
            server.stop()
        # A check's lines go to the history of the card they name (a recording writes its own there).
        for line_file in sorted(step_out.glob("history*.jsonl")):
            for line in line_file.read_text().splitlines():
                history = args.golden_dir / json.loads(line)["card"] / "history.jsonl"
                with history.open("a") as f:
                    f.write(line + "\n")
        worst = batteries.worst_exit(results)
        entry = {"name": name, "tree": tree, "variant": variant, "exit": worst, "results": results}
        with verdicts.open("a") as f:
            f.write(json.dumps(entry) + "\n")
        batteries.log(f"{name}: exit {worst}")
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    sys.exit(main())
