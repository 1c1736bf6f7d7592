"""`bitexact-server`: run the recipe's server (or a named variant) with its verbatim argv and env."""

from __future__ import annotations

import argparse
import difflib
import json
import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from exactformats.crash import one_line
from gpuhost.driver import OVERRIDE_VAR, DriverLibs, DriverNotFound, driver_environment, find_driver

from exactlaunch import capacity, fleet, values
from exactlaunch.buildinfo import build_info
from exactlaunch.environment import DEEP_GEMM_VAR, RECIPE_VAR, EnvError, LaunchEnv, build_env, check_caller
from exactlaunch.options import Once, given, strict_parser, typed
from exactlaunch.preflight import installed_package_dir, preflight
from exactlaunch.recipe import (
    Recipe,
    RecipeError,
    append_serving_flags,
    apply_variant,
    load_recipe,
    variant_named,
)

EXACT_FLAG = "--enable-deterministic-inference"
PROG = "bitexact-server"


@dataclass
class Launch:
    recipe: Recipe
    variant: str
    argv: list[str]
    env: LaunchEnv

    @property
    def exact(self) -> bool:
        return EXACT_FLAG in self.argv


def _parser() -> argparse.ArgumentParser:
    parser = strict_parser(
        prog=PROG,
        description="Start SGLang with the recipe's argv and environment, verbatim or as a named variant. "
        "Only serving flags from the recipe's allowlist are added; free arguments are not accepted. "
        "The NVIDIA driver's libraries are found on this host (NixOS, the container toolkit, FHS "
        f"distributions) and put on the server's library path; {OVERRIDE_VAR}=DIR names them instead.",
    )
    parser.add_argument("--recipe", type=Path, action=Once, help=f"recipe JSON (default: ${RECIPE_VAR})")
    parser.add_argument(
        "--variant", default="recipe", action=Once, help="variant name from the recipe (default: recipe)"
    )
    # --host and --port are checked where they are appended (exactlaunch.values, through plan()), the
    # one check that --print and a start share.
    parser.add_argument("--host", action=Once, help="address to bind (serving flag)")
    parser.add_argument("--port", action=Once, help="port to listen on (serving flag)")
    parser.add_argument(
        "--print", action="store_true", help="print the argv and the env it sets as JSON, exit"
    )
    parser.add_argument("--list-variants", action="store_true", help="list the recipe's variants, exit")
    parser.add_argument(
        "--replicas",
        type=typed(values.count),
        action=Once,
        help="start N replicas and SGLang's router (sglang_router) in front of them on --port; replica i "
        "listens on --port + 1 + i (default: one server, no router)",
    )
    parser.add_argument(
        "--gpus",
        default="0",
        action=Once,
        help="with --replicas: comma-separated GPU ids the replicas take in turn (--base-gpu-id); replicas "
        "sharing a GPU divide the recipe's --mem-fraction-static (default: 0)",
    )
    parser.add_argument(
        "--router-policy",
        default="round_robin",
        choices=fleet.POLICIES,
        action=Once,
        help="with --replicas: the router's --policy (default: round_robin, so every replica serves)",
    )
    parser.add_argument(
        "--log-dir",
        type=Path,
        action=Once,
        help="with --replicas: each replica's and the router's output to DIR/<name>.log (default: ours)",
    )
    parser.add_argument(
        "--build-info",
        action="store_true",
        help="print the build this launcher serves (recipe, SGLang and its patch series, DeepGEMM, torch, "
        "triton, the driver) as JSON for `bitexact golden check --build-info FILE`, exit",
    )
    return parser


def _extra_problem(parser: argparse.ArgumentParser, argv: list[str], extra: list[str]) -> str | None:
    """Why the arguments argparse did not consume are refused: a mistyped or foreign option is named as
    such (with the closest of ours), anything else is a free argument."""
    before_separator = argv[: argv.index("--")] if "--" in argv else argv
    options = [o for o in extra if o.startswith("-") and o != "--" and o in before_separator]
    if options:
        name = options[0].split("=", 1)[0]
        ours = sorted(s for a in parser._actions for s in a.option_strings if s.startswith("--"))
        close = difflib.get_close_matches(name, ours, n=1)
        hint = f"did you mean {close[0]}? " if close else ""
        return (
            f"unknown option {name}: {hint}{PROG} takes {', '.join(o for o in ours if o != '--help')}; "
            "SGLang flags are not accepted (the argv is the recipe's, only --host/--port are added): "
            "add a variant to the recipe"
        )
    if "--" in argv or extra:
        given = shlex.join(extra) if extra else "--"
        return (
            f"{given}: `--` and free arguments are not accepted: the argv is the recipe's (only "
            "--host/--port are added); add a variant to the recipe"
        )
    return None


def plan(
    recipe: Recipe,
    variant: str,
    serving: Mapping[str, str | None],
    caller_env: Mapping[str, str],
    python: str,
) -> Launch:
    """Everything the launcher would exec, computed without touching the installed packages' code."""
    argv, recipe_env = apply_variant(recipe.argv, recipe.env, variant_named(recipe, variant))
    argv = append_serving_flags(argv, serving, recipe.serving_flags)
    argv[0] = python
    deep_gemm = installed_package_dir("deep_gemm")
    header: bytes | None = None
    if deep_gemm is not None:
        try:
            header = (deep_gemm.parent / recipe.deep_gemm_header).read_bytes()
        except OSError:
            header = None
    env = build_env(
        caller_env,
        recipe_env,
        installed_deep_gemm=deep_gemm.parent if deep_gemm is not None else None,
        installed_header=header,
    )
    pinned = caller_env.get(DEEP_GEMM_VAR)
    if pinned and deep_gemm is not None:
        # The JIT cache is keyed by the pinned store path; say so when Python would import another one.
        actual = (deep_gemm.parent / recipe.deep_gemm_header).resolve()
        if not actual.is_relative_to(Path(pinned).resolve()):
            env.notes.append(
                f"the importable deep_gemm ({actual}) is not under {DEEP_GEMM_VAR}={pinned}; "
                "check PYTHONPATH: SGLANG_DG_CACHE_DIR is keyed by the pinned one"
            )
    return Launch(recipe=recipe, variant=variant, argv=argv, env=env)


def _fail(message: str) -> int:
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return 2


def _out(text: str) -> int:
    """`text` and a line end on stdout, flushed: 0, or 2 with a message on stderr when it cannot be
    written (stdout closed with `>&-`, a full disk, a reader that went away), never a silent 0."""
    if sys.stdout is None:
        return _fail("stdout is closed, so there is nowhere to print to; run it with stdout open (not >&-)")
    try:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    except OSError as error:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # nothing more to say there, at exit either
        os.close(devnull)
        return _fail(f"cannot write to stdout: {error.strerror or error}; nothing was printed in full")
    return 0


def _fit(
    recipe: Recipe, argv: Sequence[str], env: Mapping[str, str], replicas: Sequence[fleet.Process]
) -> list[str]:
    """Whether the replicas sharing a GPU fit it (exactlaunch.capacity): notes, or DoesNotFit."""
    sharing: dict[str, int] = {}
    for process in replicas:
        gpu = fleet.replica_gpu(process.argv)
        sharing[gpu] = sharing.get(gpu, 0) + 1
    if max(sharing.values()) < 2:
        return []
    weights, why_weights = capacity.weights_bytes(recipe.data, argv, env)
    memory, why_memory = capacity.card_memory(os.environ)
    notes = capacity.check_fit(sharing, fleet.memory_fraction(argv), weights, memory)
    return [f"{note} ({why_weights or why_memory})" for note in notes]


@one_line(PROG)
def main(args: Sequence[str] | None = None) -> int:
    argv_in = list(sys.argv[1:] if args is None else args)
    parser = _parser()
    options, extra = parser.parse_known_args(argv_in)
    # Said here rather than by argparse's "unrecognized arguments", which does not say why.
    problem = _extra_problem(parser, argv_in, extra)
    if problem:
        return _fail(problem)
    recipe_path = options.recipe or (Path(os.environ[RECIPE_VAR]) if os.environ.get(RECIPE_VAR) else None)
    if recipe_path is None:
        return _fail(f"no recipe: pass --recipe PATH or set {RECIPE_VAR} (the Nix wrapper sets it)")
    try:
        values.path_text(str(recipe_path))
    except values.BadValue as error:
        return _fail(f"{'--recipe' if options.recipe else RECIPE_VAR}: {error}")
    try:
        recipe = load_recipe(recipe_path)
        if options.list_variants:
            return _out("\n".join(f"{name}\t{v.description}" for name, v in sorted(recipe.variants.items())))
        if options.build_info:
            return _out(json.dumps(build_info(recipe.name, recipe.path, os.environ), indent=1))
        alone = sorted(
            f"--{d.replace('_', '-')}" for d in given(options) & {"gpus", "router_policy", "log_dir"}
        )
        if alone and not options.replicas:
            verb = "applies" if len(alone) == 1 else "apply"
            return _fail(f"{', '.join(alone)} only {verb} with --replicas N (a fleet behind SGLang's router)")
        if options.replicas and not options.port:
            return _fail("--replicas needs --port: the router listens there, replica i on --port + 1 + i")
        env_notes = check_caller(os.environ)
        # With replicas the launch's port is each replica's, set by the fleet plan.
        serving = {"--host": options.host, "--port": None if options.replicas else options.port}
        launch = plan(recipe, options.variant, serving, dict(os.environ), sys.executable)
        launch.env.notes[:0] = env_notes
        replicas: list[fleet.Process] = []
        if options.replicas:
            replicas, router = fleet.fleet_plan(
                launch.argv,
                launch.env.decided,
                sys.executable,
                options.replicas,
                options.gpus,
                options.host or "127.0.0.1",
                options.port,
                options.router_policy,
            )
            if options.log_dir is not None:
                fleet.log_folder(options.log_dir)
            launch.env.notes.extend(_fit(recipe, launch.argv, launch.env.full, replicas))
        # What a start makes: checked here, so that --print refuses what a start would fail on.
        cache = launch.env.decided.get("SGLANG_DG_CACHE_DIR")
        if cache:
            values.folder_to_make(Path(cache))
    except (RecipeError, fleet.FleetError, EnvError, capacity.DoesNotFit) as error:
        return _fail(str(error))
    except values.BadValue as error:
        return _fail(f"SGLANG_DG_CACHE_DIR (the DeepGEMM JIT cache): {error}; set XDG_CACHE_HOME to a folder")

    driver: DriverLibs | None = None
    driver_vars: dict[str, str] = {}
    try:
        driver = find_driver(os.environ)
        driver_vars, driver_notes = driver_environment(driver, os.environ)
        launch.env.notes.extend(driver_notes)
        driver_problem = None
    except DriverNotFound as error:
        driver_problem = str(error)
    for note in launch.env.notes:
        print(f"{PROG}: note: {note}", file=sys.stderr)
    if options.print:
        summary = {
            "variant": launch.variant,
            "exact": launch.exact,
            "argv": launch.argv,
            "env": launch.env.decided,
            # This host's driver (not part of the recipe's env): what the server would get, or why not.
            "driver": {**driver.to_json(), "env": driver_vars} if driver else {"error": driver_problem},
        }
        if replicas:
            summary["fleet"] = json.loads(fleet.plan_json(replicas, router))
        return _out(json.dumps(summary, indent=2))
    if launch.exact:
        failures = preflight(recipe)
        if failures:
            print(f"{PROG}: refusing to start in exact mode ({EXACT_FLAG}):", file=sys.stderr)
            for failure in failures:
                print(f"  {failure}".replace("\n", "\n  "), file=sys.stderr)
            return 2
    if driver_problem is not None:
        # torch caches cuda availability at its first look: the driver must be on the library path
        # of the server's process from its start, so the launcher refuses rather than starting blind.
        return _fail(f"refusing to start: {driver_problem}")
    launch.env.full.update(driver_vars)
    if cache:
        try:
            Path(cache).mkdir(parents=True, exist_ok=True)
        except OSError as error:
            return _fail(f"cannot make SGLANG_DG_CACHE_DIR {cache}: {error.strerror or error}")
    sys.stdout.flush()
    sys.stderr.flush()
    if replicas:
        return fleet.supervise(replicas, router, launch.env.full, options.log_dir)
    try:
        os.execvpe(launch.argv[0], launch.argv, launch.env.full)
    except OSError as error:
        return _fail(f"cannot start {launch.argv[0]}: {error.strerror or error}")


if __name__ == "__main__":
    sys.exit(main())
