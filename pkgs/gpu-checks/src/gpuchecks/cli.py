"""`bitexact-gpu-checks`: the GPU checks' one runner.

    bitexact-gpu-checks run --plan PLAN --recipe RECIPE --tree patched=DIR [--tree stock=DIR] ...
    bitexact-gpu-checks record --plan PLAN --recipe RECIPE --tree patched=DIR ... [-- --force]
    bitexact-gpu-checks steps --plan PLAN
    bitexact-gpu-checks summary OUT
    bitexact-gpu-checks verdict OUT STEP

`run` exits 0 when everything passed, 1 when something differs (or the stock tree did not do what the
plan says), 2 for anything else, 130 when interrupted (what finished is kept; the same command resumes)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shlex
import sys
from pathlib import Path
from typing import Any

from exactformats.crash import one_line
from exactlaunch import values
from exactlaunch.options import Once, strict_parser, typed

from gpuchecks import plan as plan_mod
from gpuchecks import ports
from gpuchecks.host import HostError, read_host
from gpuchecks.results import Verdicts, outcome, overall_exit, summary_lines
from gpuchecks.run import Inputs, Run, RunError, install_signal_handlers, prepare_out
from gpuchecks.servers import port_taken
from gpuchecks.trees import TREE_NAMES, Tree, TreeError, check_site, recipe_setting, with_memory_fraction

PROG = "bitexact-gpu-checks"
DEEPGEMM_OFF = ("SGLANG_ENABLE_JIT_DEEPGEMM", "0")


def pair(option: str) -> Any:
    def convert(text: str) -> tuple[str, str]:
        key, sep, value = text.partition("=")
        if not sep or not key or not value:
            raise argparse.ArgumentTypeError(f"{option} takes NAME=VALUE, not {text!r}")
        return key, value

    return convert


# The launcher's own checks of a port and a memory fraction (exactlaunch.values), one place for all.
port = typed(values.port)
fraction = typed(values.fraction)
_SECONDS = re.compile(r"[0-9]+(\.[0-9]*)?|\.[0-9]+")
LANES_MAX = 8


def lanes(text: str) -> int:
    value = values.count(text) if text.isascii() else 0
    if not 1 <= value <= LANES_MAX:
        raise argparse.ArgumentTypeError(f"not a number of lanes from 1 to {LANES_MAX}: {text!r}")
    return value


def seconds(text: str) -> float:
    """A finite, positive number of seconds in ASCII digits (not inf, nan, 1e9 or -1), at most a week."""
    if not _SECONDS.fullmatch(text) or not 0 < float(text) <= 7 * 86400:
        raise argparse.ArgumentTypeError(f"not a number of seconds from 0 to a week: {text!r}")
    return float(text)


def command(text: str) -> list[str]:
    argv = shlex.split(text)
    if not argv:
        raise argparse.ArgumentTypeError("an empty command")
    return argv


def _inputs(parser: argparse.ArgumentParser, kernels: bool) -> None:
    once: dict[str, Any] = {"action": Once}
    parser.add_argument(
        "--plan", type=Path, required=True, help="the plan JSON (nix/lib/gpu-batteries.nix's `plan`)", **once
    )
    parser.add_argument("--recipe", type=Path, required=True, help="the recipe JSON the servers run", **once)
    parser.add_argument(
        "--tree", type=pair("--tree"), action="append", required=True, metavar="NAME=DIR",
        help="an SGLang site-packages tree: patched=DIR (required), stock=DIR (the released tree, for the "
        "plan's stock expectations)",
    )  # fmt: skip
    parser.add_argument(
        "--launcher", type=pair("--launcher"), action="append", default=[], metavar="NAME=CMD",
        help="the launcher program of tree NAME (the flake: that build's bitexact-server); default: this "
        "Python's `-m exactlaunch.cli` with PYTHONPATH at the tree and --deps",
    )  # fmt: skip
    parser.add_argument(
        "--deps",
        type=Path,
        action="append",
        default=[],
        help="site-packages with the servers' dependencies (a host without Nix)",
    )
    parser.add_argument(
        "--golden-dir",
        type=Path,
        required=True,
        help="the goldens (checks/golden): <card>/<recipe>.json",
        **once,
    )
    parser.add_argument(
        "--model-snapshot",
        type=Path,
        help="the model's folder (its tokenizer makes the long prompts; bitexact checks it)",
        **once,
    )
    parser.add_argument(
        "--hub-cache",
        type=Path,
        help="a Hugging Face hub cache holding the recipe's weights (BITEXACT_HF_HUB_CACHE)",
        **once,
    )
    parser.add_argument(
        "--bitexact", type=command, help="how to run bitexact (default: this Python's -m bitexact)", **once
    )
    parser.add_argument(
        "--out", type=Path, required=True, help="results, written as they come; a rerun resumes", **once
    )
    parser.add_argument(
        "--port", type=port, default=30000, help="the servers' port (lane N: PORT+N; default 30000)", **once
    )
    parser.add_argument(
        "--start-timeout",
        type=seconds,
        default=1800.0,
        help="seconds a server may take to start (default 1800)",
        **once,
    )
    parser.add_argument(
        "--mem-fraction-static", type=fraction,
        help="replace the recipe's --mem-fraction-static (a copy under OUT keeps the recipe's name): for "
        "lanes sharing one card", **once,
    )  # fmt: skip
    parser.add_argument(
        "--server-env", type=pair("--server-env"), action="append", default=[], metavar="KEY=VALUE",
        help="a host setting for every server beside the recipe's own environment (recorded in run.json)",
    )  # fmt: skip
    if kernels:
        parser.add_argument(
            "--kernel-checks",
            type=Path,
            help="the kernel checks' folder (checks/gpu), copied before it runs",
            **once,
        )
        parser.add_argument(
            "--series",
            type=Path,
            help="the SGLang patch series (patches/sglang) the kernel checks read",
            **once,
        )
        parser.add_argument(
            "--python",
            type=command,
            help="the Python that runs the kernel checks (pytest, torch; default: this one)",
            **once,
        )
        parser.add_argument(
            "--lanes", type=lanes, default=1, help="jobs side by side on one card (default 1)", **once
        )
        parser.add_argument("--only", help="comma-separated step names (default: the whole plan)", **once)


def build_parser() -> argparse.ArgumentParser:
    parser = strict_parser(prog=PROG, description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="verb", required=True)
    run = sub.add_parser("run", allow_abbrev=False, help="run the whole plan on this card")
    _inputs(run, kernels=True)
    rec = sub.add_parser(
        "record", allow_abbrev=False, help="record this card's goldens (the plan's goldenRecord)"
    )
    _inputs(rec, kernels=False)
    steps = sub.add_parser("steps", allow_abbrev=False, help="print the plan's step names as JSON")
    steps.add_argument("--plan", type=Path, required=True, action=Once)
    summary = sub.add_parser("summary", allow_abbrev=False, help="print the summary of a run's OUT folder")
    summary.add_argument("out", type=Path)
    verdict = sub.add_parser(
        "verdict", allow_abbrev=False,
        help="one step's verdict in a run's OUT folder: 0 passed (or left out, with the reason), 1 differs, "
        "2 error",
    )  # fmt: skip
    verdict.add_argument("out", type=Path)
    verdict.add_argument("step")
    return parser


def fail(message: str) -> int:
    print(f"{PROG}: {message}", file=sys.stderr)
    return 2


def trees_of(args: argparse.Namespace, server_env: dict[str, str]) -> dict[str, Tree]:
    given: dict[str, Path] = {}
    for name, value in args.tree:
        if name not in TREE_NAMES:
            raise TreeError(f"--tree {name}=...: the trees are {', '.join(TREE_NAMES)}")
        if name in given:
            raise TreeError(f"--tree {name} given twice")
        given[name] = check_site(name, Path(value).absolute())
    if "patched" not in given:
        raise TreeError("--tree patched=DIR is required: the build under test")
    launchers = dict(args.launcher)
    unknown = sorted(set(launchers) - set(given))
    if unknown:
        raise TreeError(f"--launcher {unknown[0]}=...: no --tree {unknown[0]} given")
    deps = tuple(Path(d).absolute() for d in args.deps)
    for d in deps:
        if not d.is_dir():
            raise TreeError(f"--deps {d}: no such folder")
    return {
        name: Tree(name, site, tuple(command(launchers[name])) if name in launchers else (), deps, server_env)
        for name, site in given.items()
    }


def driver_env(base: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """The driver on the library path and TRITON_LIBCUDA_PATH, as the launcher gives its servers (torch
    and triton need both from the process's start); nothing where discovery finds no driver."""
    try:
        from gpuhost.driver import DriverNotFound, driver_environment, find_driver
    except ImportError as error:
        return {}, [f"gpuhost does not import ({error}); the kernel checks get no driver discovery"]
    try:
        libs = find_driver(base)
    except DriverNotFound as error:
        return {}, [f"no NVIDIA driver found for the kernel checks: {error}"]
    found, notes = driver_environment(libs, base)
    return found, notes


@one_line(PROG)
def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    extra: list[str] = []
    if "--" in argv:
        at = argv.index("--")
        argv, extra = argv[:at], argv[at + 1 :]
    parser = build_parser()
    args = parser.parse_args(argv)
    if extra and args.verb != "record":
        return fail(f"arguments after `--` go to `record`'s bitexact commands only: {' '.join(extra)}")
    try:
        if args.verb == "steps":
            print(json.dumps(plan_mod.load(args.plan).step_names))
            return 0
        if args.verb == "summary":
            return summary(args.out)
        if args.verb == "verdict":
            return step_verdict(args.out, args.step)
        return run_or_record(args, extra)
    except (plan_mod.PlanError, TreeError, RunError, HostError, ValueError) as error:
        return fail(str(error))
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130


def summary(out: Path) -> int:
    run_path = out / "run.json"
    if not run_path.is_file():
        return fail(f"{out}: no run.json: not a run's OUT folder")
    run = json.loads(run_path.read_text())
    entries = Verdicts(out).entries()
    for line in summary_lines(run, entries):
        print(line)
    if not run.get("finished"):
        print(
            f"{PROG}: the run in {out} did not finish (interrupted, or still running): "
            "these are its verdicts so far"
        )
        return 2
    return overall_exit(Verdicts(out).latest().values())


def step_verdict(out: Path, step: str) -> int:
    """A flake check's view of one step: every tree's latest verdict for it (the stock tree's checked
    against the plan's expectation), printed; the worst decides."""
    if not (out / "run.json").is_file():
        return fail(f"{out}: no run.json: not a run's OUT folder")
    entries = [e for (tree, name), e in Verdicts(out).latest().items() if name == step]
    if not any(e["tree"] == "patched" for e in entries):
        # the stock tree's expectation alone says nothing of the build under test
        return fail(
            f"{out}: no verdict for step {step!r} on the patched tree: the run did not reach it "
            "(its log says why)"
        )
    for line in summary_lines({"out": str(out), "host_line": step}, entries)[1:-1]:
        print(line)
    words = {outcome(e) for e in entries}
    if words <= {"LEFT-OUT"}:
        return 0  # not applicable here, with the reason printed above
    return overall_exit(entries)


def run_or_record(args: argparse.Namespace, extra: list[str]) -> int:
    plan = plan_mod.load(args.plan)
    recipe = args.recipe.absolute()
    if not recipe.is_file():
        return fail(f"--recipe {recipe}: no such file")
    if not args.golden_dir.is_dir():
        return fail(f"--golden-dir {args.golden_dir}: no such folder (the goldens: checks/golden)")
    out = args.out.absolute()
    server_env = dict(args.server_env)
    if args.hub_cache is not None:
        if not args.hub_cache.is_dir():
            return fail(f"--hub-cache {args.hub_cache}: no such folder")
        server_env["BITEXACT_HF_HUB_CACHE"] = str(args.hub_cache.absolute())
    clash = recipe_setting(recipe, server_env)
    if clash:
        return fail(f"--server-env {clash[0]}: the recipe sets it; its environment is not a host setting")
    lanes = getattr(args, "lanes", 1)
    if lanes > 1 and (args.mem_fraction_static is None or lanes * args.mem_fraction_static > 0.9):
        return fail(
            f"--lanes {lanes} puts {lanes} servers on one card: give --mem-fraction-static F with "
            f"{lanes} x F <= 0.9 (each server sizes its pools from that share)"
        )
    if args.mem_fraction_static is not None:
        recipe = with_memory_fraction(recipe, args.mem_fraction_static, out / "recipe.json")
    trees = trees_of(args, server_env)
    only = None
    if getattr(args, "only", None):
        only = set(args.only.split(","))
        references = sorted(only & {r.name for r in plan.references.values()})
        if references:
            return fail(
                f"--only {', '.join(references)}: a reference runs for the batteries that need it; name those"
            )
        unknown = sorted(only - set(plan.step_names))
        if unknown:
            return fail(
                f"--only names {', '.join(unknown)}, which the plan does not hold "
                f"({', '.join(plan.step_names)})"
            )
    kernel_checks = getattr(args, "kernel_checks", None)
    series = getattr(args, "series", None)
    kernels_wanted = args.verb == "run" and (only is None or plan.kernels_name in only)
    if kernels_wanted:
        if kernel_checks is None or series is None:
            return fail(
                "the plan's kernel phase needs --kernel-checks DIR (checks/gpu) and --series DIR "
                "(patches/sglang)"
            )
        if not (series.is_dir() and any(series.glob("*.patch"))):
            return fail(f"--series {series}: no *.patch there (the SGLang series: patches/sglang)")
    for lane_port in range(args.port, args.port + lanes):  # before the host is probed: no lane could start
        if not ports.port_free(lane_port):
            return fail(port_taken(lane_port))
    python = getattr(args, "python", None) or [sys.executable]
    patched = trees["patched"]
    base = dict(os.environ)
    deps_path = os.pathsep.join(str(d) for d in patched.deps)
    if deps_path:
        base["PYTHONPATH"] = os.pathsep.join(p for p in (deps_path, base.get("PYTHONPATH", "")) if p)
    found, driver_notes = driver_env(base)
    base.update(found)
    host = read_host(python, base)
    notes = [f"{k}={v} (given with --server-env)" for k, v in sorted(args.server_env)]
    if not host.features.get("deepgemm-runs", False) and DEEPGEMM_OFF[0] not in server_env:
        # What the kernel checks select by, the servers run by: DeepGEMM off where it does not run.
        server_env[DEEPGEMM_OFF[0]] = DEEPGEMM_OFF[1]
        notes.append(f"{'='.join(DEEPGEMM_OFF)}: DeepGEMM does not run here ({host.why['deepgemm-runs']})")
    # The trees' servers get the settings as decided now (the probe's included).
    trees = {name: dataclasses.replace(tree, server_env=dict(server_env)) for name, tree in trees.items()}
    patched = trees["patched"]
    kernel_env = dict(base)
    kernel_env["BITEXACT_SGLANG_TREE"] = str(patched.site)
    if "stock" in trees:
        kernel_env["BITEXACT_SGLANG_STOCK_TREE"] = str(trees["stock"].site)
    if series is not None:
        kernel_env["BITEXACT_SGLANG_SERIES"] = str(series.absolute())
    inputs = Inputs(
        plan=plan,
        recipe=recipe,
        trees=trees,
        golden_dir=args.golden_dir.absolute(),
        out=out,
        port=args.port,
        bitexact=args.bitexact or [sys.executable, "-m", "bitexact"],
        python=python,
        kernel_checks=kernel_checks.absolute() if kernel_checks else None,
        series=series.absolute() if series else None,
        model_snapshot=args.model_snapshot.absolute()
        if args.model_snapshot and args.model_snapshot.exists()
        else args.model_snapshot,
        lanes=lanes,
        start_timeout=args.start_timeout,
        only=only,
        kernel_env=kernel_env,
        settings_notes=notes + driver_notes,
    )
    prepare_out(inputs, host, {"verb": args.verb, "server_env": server_env})
    print(f"{PROG}: {host.describe()}", file=sys.stderr)
    for note in inputs.settings_notes:
        print(f"{PROG}: host setting: {note}", file=sys.stderr)
    restore = install_signal_handlers()
    try:
        run = Run(inputs, host)
        if args.verb == "record":
            from gpuchecks.record import record

            return record(run, extra)
        return run.execute()
    finally:
        restore()


if __name__ == "__main__":
    sys.exit(main())
