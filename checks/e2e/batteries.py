"""Run the GPU batteries against a real SGLang server on a GPU host with no network (issue 10).

The batteries are the flake's own (nix/lib/gpu-batteries.nix, exported to checks/e2e/batteries.json;
an offline test keeps the two equal): record the `no-spec` reference (short and long prompts), then
start each battery's server variant and run its `bitexact` commands. Verdicts are written as they come
(`OUT/<tree>/verdicts.jsonl`); a rerun skips the batteries whose verdict compared something (exit 0 or
1) and runs again the ones that ended in an error (exit 2: a server that did not start, a missing tree).

Trees (made by checks/e2e/assemble.py under WORK):
- `patched`: the series applied, started through the launcher (`python -m exactlaunch.cli`), whose
  preflight must accept the tree;
- `stock`: the released wheel, started with the argv and environment that `--print` gives, run
  directly (the launcher's preflight rightly refuses a stock tree; there is no bypass flag).

Usage (repository root, on the GPU host, after assemble.py and tiny_model.py):
    python checks/e2e/batteries.py --work WORK --tree patched --out OUT
The prefix-reuse batteries (`gpu-radix-*`, on the `radix` variants) are in the plan too; the one that
compares with the card's goldens runs with `--golden-dir DIR` (goldens.py's `record` writes DIR).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ports  # noqa: E402  (checks/e2e/ports.py: who listens on the port)
import runner_args as ra  # noqa: E402  (the runners' strict command lines)

REPO = Path(__file__).resolve().parents[2]
PLAN = Path(__file__).with_name("batteries.json")
RECIPE = REPO / "nix" / "recipes" / "e2e-tiny-hybrid.json"
MODEL_DIR = REPO / ".e2e" / "models" / "target"  # checks/e2e/tiny_model.py's target (`h200.sh model`)
PORT = 30000


def _edited_recipe(recipe: Path, dest: Path, edit: Callable[[list[str]], str | None]) -> Path:
    """A copy of the recipe at `dest` with its launch argv changed in place by `edit`, which returns
    what is missing for the edit (the copy is then refused) or None. The copy keeps the recipe's name, so
    its goldens and references key as the recipe's do."""
    data = json.loads(recipe.read_text())
    missing = edit(data["launch"]["argv"])
    if missing:
        raise SystemExit(f"{recipe}: its argv {missing}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(data, indent=2) + "\n")
    return dest


def recipe_with_memory(recipe: Path, fraction: float, dest: Path) -> Path:
    """A copy of the recipe whose `--mem-fraction-static` is `fraction`, for servers that share one card.
    SGLang 0.5.20 sizes its pools from the memory free when it starts (model_runner's
    pre_model_load_memory): two servers at the recipe's 0.88 starting together would each claim 88% of the
    card."""

    def edit(argv: list[str]) -> str | None:
        if "--mem-fraction-static" not in argv:
            return "sets no --mem-fraction-static to replace"
        argv[argv.index("--mem-fraction-static") + 1] = f"{fraction:g}"
        return None

    return _edited_recipe(recipe, dest, edit)


DETERMINISTIC_FLAG = "--enable-deterministic-inference"


def recipe_without_determinism(recipe: Path, dest: Path) -> Path:
    """A copy of the recipe without `--enable-deterministic-inference`: stock SGLang as its users run it,
    for the capacity table's non-deterministic row (issue 20). The checks read the same copy, so what
    they compare against says what the server ran."""

    def edit(argv: list[str]) -> str | None:
        if DETERMINISTIC_FLAG not in argv:
            return f"has no {DETERMINISTIC_FLAG} to drop"
        argv.remove(DETERMINISTIC_FLAG)
        return None

    return _edited_recipe(recipe, dest, edit)


def log(message: str) -> None:
    print(f"[e2e {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def python_path(work: Path, tree: str) -> str:
    """The tree first (its sglang), then the shared dependencies, the launcher and bitexact."""
    parts = [
        work / tree,
        work / "deps",
        REPO / "pkgs" / "server" / "src",
        REPO / "pkgs" / "bitexact" / "src",
    ]
    return os.pathsep.join(str(p) for p in parts)


def base_env(work: Path, tree: str, recipe: Path = RECIPE) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = python_path(work, tree)
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("BITEXACT_RECIPE", str(recipe))
    # The one setting beside the recipe's: sglang-kernel here is 0.4.5 (the host's torch 2.11 cannot load
    # 0.4.7), and SGLang 0.5.20 refuses a kernel below 0.4.7 unless told to skip its version check.
    env["SGLANG_SKIP_SGL_KERNEL_VERSION_CHECK"] = "1"
    # DeepGEMM 0.2.0 (built for torch 2.13) imports on the host's torch 2.11, so SGLang would route
    # batch-invariant GEMMs to its sm90 kernel, which asserted during CUDA graph capture (docs/e2e.md);
    # the Triton persistent path is what the H200 kernel checks measure. The recipe's card takes
    # DeepGEMM's sm120 path.
    env["SGLANG_ENABLE_JIT_DEEPGEMM"] = "0"
    return env


def launcher(variant: str, extra: list[str], recipe: Path = RECIPE) -> list[str]:
    return [sys.executable, "-m", "exactlaunch.cli", "--recipe", str(recipe), "--variant", variant, *extra]


def through_launcher(work: Path, tree: str) -> bool:
    """Whether TREE starts through the launcher: `patched`, or any tree carrying our series' manifest (a
    rebuild). Any other (`stock`, a tree missing a patch) runs the argv the launcher prints, since its
    preflight rightly refuses such a tree."""
    return tree == "patched" or (work / tree / "sglang" / "srt" / "bitexact_manifest.json").is_file()


def server_command(
    work: Path, tree: str, variant: str, port: int, recipe: Path = RECIPE
) -> tuple[list[str], dict[str, str]]:
    """(argv, env) of the server: the launcher, or its printed argv run directly (`through_launcher`)."""
    env = base_env(work, tree, recipe)
    serving = ["--host", "127.0.0.1", "--port", str(port)]
    if through_launcher(work, tree):
        return launcher(variant, serving, recipe), env
    printed = subprocess.run(
        launcher(variant, [*serving, "--print"], recipe), env=env, capture_output=True, text=True, check=True
    )
    plan = json.loads(printed.stdout)
    env.update(plan["env"])
    return list(plan["argv"]), env


class PortTaken(RuntimeError):
    """The port is held by another process: a server left by an earlier run, or someone else's."""


# SGLang 0.5.20 sizes its pools from the GPU memory free before its weights load against what is free
# after (kv_cache_configurator.py, `_profile_available_bytes` and `_handle_max_mamba_cache`): a neighbour
# that allocates in between makes the start fail with one of these, though the same start alone fits.
POOL_SIZING_FAILURES = (
    "Loaded weights leave no GPU memory for the KV cache",
    "Not enough GPU memory for hybrid (mamba/linear-attention) state cache",
)


def earlier_verdicts(path: Path) -> tuple[set[str], set[str]]:
    """A rerun's view of its verdicts file: the names that compared something (exit 0 or 1: skipped) and
    the ones whose only verdicts are errors (exit 2: a server that did not start; run again, never kept
    as done, so a run on a machine that was not ready cannot stand in for the real one)."""
    entries = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    compared = {entry["name"] for entry in entries if entry.get("exit") in (0, 1)}
    return compared, {entry["name"] for entry in entries} - compared


def worst_exit(results: list[dict[str, Any]]) -> int:
    """A step's verdict from its commands' exit codes: 0 equal, 1 differs, and anything else (2, or a
    negative code: killed by a signal) an error, so that a killed command never passes as compared."""
    return max(r["exit"] if r["exit"] in (0, 1) else 2 for r in results)


def rerun_command(command: list[str]) -> list[str]:
    """A command of a step run again after an error: a `golden record` that wrote its golden before the
    step failed would refuse to replace it, so it is told to (--force; the same command resumes its
    --out as before)."""
    if command[1:3] == ["golden", "record"] and "--force" not in command:
        return [*command, "--force"]
    return command


def port_taken(port: int) -> str:
    return (
        f"port {port} is taken ({ports.describe(ports.listeners(port))}): a server left by an earlier run, "
        "or another program; stop it (kill the pid) or choose another --port"
    )


def missing_parts(work: Path, tree: str) -> list[str]:
    """What a run needs that lives only while the GPU machine is held (a fresh one has none of it): the
    assembled tree, the shared dependencies and the tiny model."""
    needed = [work / tree / "sglang", work / "deps" / ".complete", MODEL_DIR / "config.json"]
    return [str(path) for path in needed if not path.exists()]


class Server:
    """One server process (its own process group), its log, and readiness through /health_generate. It
    refuses a port another process holds, and is ready only when the process listening on the port is its
    own (a server left behind by a run cut short must never answer for this one). A start that fails in
    SGLang's pool sizing (POOL_SIZING_FAILURES) is started again after a pause, at most
    `pool_sizing_retries` times, each one logged and listed in `restarts`."""

    pool_sizing_retries = 2
    pool_sizing_pause_s = 30.0

    def __init__(
        self,
        work: Path,
        tree: str,
        variant: str,
        port: int,
        log_path: Path,
        recipe: Path = RECIPE,
        command: tuple[list[str], dict[str, str]] | None = None,
    ) -> None:
        self.variant, self.port, self.log_path = variant, port, log_path
        if not ports.port_free(port):
            raise PortTaken(port_taken(port))
        self.argv, self.env = command or server_command(work, tree, variant, port, recipe)
        self.restarts: list[str] = []
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self.log_file = log_path.open("w")
        self._launch()

    def _launch(self) -> None:
        self.log_file.write("+ " + " ".join(self.argv) + "\n")
        self.log_file.flush()
        self.log_start = self.log_file.tell()
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            self.argv,
            cwd=REPO,
            env=self.env,
            stdout=self.log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def pool_sizing_failure(self) -> str | None:
        """The pool-sizing message the latest start's log ends with, or None."""
        with self.log_path.open("rb") as f:
            f.seek(self.log_start)
            text = f.read().decode(errors="replace")
        return next((sign for sign in POOL_SIZING_FAILURES if sign in text), None)

    def wait_ready(self, timeout_s: float) -> float:
        """Seconds from the latest start to readiness. TIMEOUT_S counts from the first start, restarts
        included, so that a caller's time budget holds; a restart is tried only while time is left."""
        url = f"http://127.0.0.1:{self.port}/health_generate"
        deadline = self.started + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                failure = self.pool_sizing_failure()
                time_left = deadline - time.monotonic() > self.pool_sizing_pause_s
                if failure and len(self.restarts) < self.pool_sizing_retries and time_left:
                    self.restarts.append(failure)
                    note = (
                        f"the {self.variant} server failed in SGLang's pool sizing ({failure}; a neighbour "
                        f"allocated while it loaded?): starting it again in {self.pool_sizing_pause_s:.0f} s "
                        f"(restart {len(self.restarts)} of at most {self.pool_sizing_retries})"
                    )
                    log(note)
                    self.log_file.write(f"\n=== bitexact e2e: {note}\n")
                    self.log_file.flush()
                    kill_group(self.proc.pid)  # what the failed start left of its process group
                    time.sleep(self.pool_sizing_pause_s)
                    self._launch()
                    continue
                tried = f" (its start was tried {len(self.restarts) + 1} times)" if self.restarts else ""
                raise RuntimeError(
                    f"the {self.variant} server exited with {self.proc.returncode}{tried}: {self.tail()}"
                )
            if answers(url):
                self.check_listener()
                return time.monotonic() - self.started
            time.sleep(1)
        tried = f" (its start was tried {len(self.restarts) + 1} times)" if self.restarts else ""
        raise RuntimeError(
            f"the {self.variant} server was not ready after {timeout_s:.0f} s{tried}: {self.tail()}"
        )

    def check_listener(self) -> None:
        """The process listening on the port belongs to this server's process group, or RuntimeError."""
        holders = ports.listeners(self.port)
        if not holders or not all(ports.in_group(pid, self.proc.pid) for pid in holders):
            raise RuntimeError(
                f"port {self.port} answers, but not from the {self.variant} server this run started (pid "
                f"{self.proc.pid}): it is held by {ports.describe(holders)}; stop that process"
            )

    def tail(self, lines: int = 40) -> str:
        text = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])

    def stop(self) -> None:
        stop_group(self.proc, 30)
        self.log_file.close()


def answers(url: str) -> bool:
    """GET `url` answered 200 (a server not up yet, or refusing connections, is False)."""
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return bool(answer.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def kill_group(pgid: int) -> None:
    """SIGKILL to what is left of the process group PGID (nothing, once every member has exited)."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def stop_group(proc: subprocess.Popen[bytes], grace_s: float) -> None:
    """SIGTERM to the process group `proc` leads (started with start_new_session), SIGKILL after
    `grace_s` seconds."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def with_long(command: list[str], lengths: str | None) -> list[str]:
    """The command with its `--long` lengths replaced by `lengths` (unchanged without either)."""
    if lengths is None or "--long" not in command:
        return command
    at = command.index("--long") + 1
    return [*command[:at], lengths, *command[at + 1 :]]


def fill(command: list[str], values: dict[str, str]) -> list[str]:
    out = []
    for arg in command:
        for key, value in values.items():
            arg = arg.replace(f"@{key}@", value)
        out.append(arg)
    return out


def run_bitexact(
    command: list[str], work: Path, tree: str, log_path: Path, env_extra: dict[str, str] | None = None
) -> dict[str, Any]:
    """One bitexact command (its argv starts with `bitexact`); exit code, summary (--json) and time."""
    argv = [sys.executable, "-m", "bitexact", *command[1:]]
    env = {**base_env(work, tree), **(env_extra or {})}
    started = time.monotonic()
    with log_path.open("a") as stderr:
        stderr.write("+ " + " ".join(command) + "\n")
        stderr.flush()
        done = subprocess.run(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=stderr, text=True)
    summary: Any = None
    if "--json" in command:
        try:
            summary = json.loads(done.stdout)
        except json.JSONDecodeError:
            summary = done.stdout[-2000:]
    else:
        summary = done.stdout.strip()[-2000:]
    return {
        "command": command,
        "exit": done.returncode,
        "seconds": round(time.monotonic() - started, 1),
        "summary": summary,
    }


def needs_goldens(battery: dict[str, Any]) -> bool:
    """Whether a battery's commands compare with the card's goldens (they name @GOLDEN_DIR@)."""
    return any("@GOLDEN_DIR@" in arg for command in battery["commands"] for arg in command)


def meta_sample(port: int, ids: list[int], max_new_tokens: int = 64) -> dict[str, Any]:
    """One /generate answer's meta_info: the server's own account of speculation (verify steps, accepted
    drafts, accept length)."""
    body = {
        "input_ids": ids,
        "sampling_params": {"temperature": 0.0, "max_new_tokens": max_new_tokens, "ignore_eos": True},
    }
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/generate",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=300) as answer:
        meta = json.load(answer)["meta_info"]
    return {
        k: v for k, v in meta.items() if k.startswith("spec") or k in ("completion_tokens", "prompt_tokens")
    }


@ra.one_line("checks/e2e/batteries.py")
def main(argv: list[str] | None = None) -> int:
    plan = json.loads(PLAN.read_text())
    parser = ra.strict_parser(description=__doc__.split("\n\n")[0])
    once = {"action": ra.Once}
    parser.add_argument(
        "--work", type=Path, required=True, help="assemble.py's folder (trees, deps, models)", **once
    )
    parser.add_argument("--tree", choices=("patched", "stock"), required=True, **once)
    parser.add_argument("--out", type=Path, required=True, **once)
    parser.add_argument("--port", type=ra.port, default=PORT, **once)
    parser.add_argument(
        "--only",
        # gpu-golden is goldens.py's to run (it needs a recorded golden).
        type=ra.names([b["name"] for b in plan["batteries"] if b["name"] != "gpu-golden"], "--only"),
        help="comma-separated battery names (default: all but gpu-golden)",
        **once,
    )
    parser.add_argument(
        "--long", help="long prompt lengths for the long reference (default: the plan's)", **once
    )
    parser.add_argument("--start-timeout", type=ra.seconds, default=600.0, **once)
    parser.add_argument(
        "--golden-dir",
        type=Path,
        help="the card's goldens (goldens.py's `record` writes them): the batteries that compare with them "
        "(gpu-radix-golden) run only with it; gpu-golden itself is goldens.py's",
    )
    parser.add_argument(
        "--mem-fraction-static",
        type=ra.fraction,
        **once,
        help="replace the recipe's --mem-fraction-static (e.g. 0.3 for two or three servers on one card; "
        "every server of this run, the references' too, gets it)",
    )
    parser.add_argument(
        "--no-deterministic",
        action="store_true",
        help=f"drop {DETERMINISTIC_FLAG} from every server of this run (results under OUT/<tree>-"
        "nondeterministic); the launcher then starts even the patched tree without its exact preflight",
    )
    args = parser.parse_args(argv)

    out = args.out / (f"{args.tree}-nondeterministic" if args.no_deterministic else args.tree)
    out.mkdir(parents=True, exist_ok=True)
    recipe = RECIPE
    if args.mem_fraction_static is not None:
        recipe = recipe_with_memory(RECIPE, args.mem_fraction_static, out / "recipe.json")
        log(f"servers get --mem-fraction-static {args.mem_fraction_static:g} ({recipe})")
    if args.no_deterministic:
        recipe = recipe_without_determinism(recipe, out / "recipe.json")
        log(f"servers run without {DETERMINISTIC_FLAG} ({recipe})")
    verdicts_path = out / "verdicts.jsonl"
    done, errored = earlier_verdicts(verdicts_path)
    wanted = set(args.only) if args.only else None
    batteries = [
        b for b in plan["batteries"] if (wanted is None or b["name"] in wanted) and b["name"] != "gpu-golden"
    ]
    if args.golden_dir is None:
        for b in [b for b in batteries if needs_goldens(b)]:
            if wanted is not None:
                parser.error(f"{b['name']} compares with the card's goldens: give --golden-dir")
            log(f"{b['name']}: left out (it compares with the card's goldens: give --golden-dir)")
            batteries.remove(b)
    refs_needed = {b["reference"] for b in batteries if b["reference"]}
    refs_needed |= {"long" for b in batteries if b.get("longReference")}
    model_dir = str(REPO / ".e2e" / "models" / "target")
    values = {
        "RECIPE": str(recipe),
        "MODEL_SNAPSHOT": model_dir,
        "URL": f"sglang+http://127.0.0.1:{args.port}",
    }

    def record(entry: dict[str, Any]) -> None:
        with verdicts_path.open("a") as f:
            f.write(json.dumps(entry) + "\n")
        log(f"{entry['name']}: exit {entry.get('exit')}")

    # Group by server variant so that each server starts once: references first (no-spec).
    steps: list[tuple[str, str, list[list[str]], str | None]] = []
    for kind in ("short", "long"):
        if kind in refs_needed:
            ref = plan["references"][kind]
            commands = [with_long(c, args.long) for c in ref["commands"]]
            steps.append((ref["name"], ref["variant"], commands, None))
    for b in batteries:
        steps.append((b["name"], b["variant"], b["commands"], b["reference"]))
    order = ["no-spec", "recipe", "forced-reject"]
    steps.sort(key=lambda s: order.index(s[1]) if s[1] in order else len(order))

    # Before any verdict is written: a server that cannot start would fill the file with errors.
    pending = [step for step in steps if step[0] not in done]
    for name in sorted(errored & {step[0] for step in pending}):
        log(f"{name}: its verdict in {verdicts_path} is an error, run again")
    if pending and not ports.port_free(args.port):
        log(f"error: {port_taken(args.port)}")
        return 2
    missing = missing_parts(args.work, args.tree) if pending else []
    if missing:
        log(
            f"error: not ready: {', '.join(missing)} missing. Run `bash checks/e2e/h200.sh stash ...`, "
            "`bash checks/e2e/h200.sh build` and `bash checks/e2e/h200.sh model` first (docs/e2e.md); a "
            "machine given back between calls starts bare"
        )
        return 2
    current: Server | None = None
    failed_variants: set[str] = set()
    try:
        for name, variant, commands, reference in steps:
            if name in done:
                log(f"{name}: verdict already in {verdicts_path}, skipped")
                continue
            if variant in failed_variants:
                record(
                    {
                        "name": name,
                        "variant": variant,
                        "exit": 2,
                        "error": f"the {variant} server did not start",
                    }
                )
                continue
            if current is None or current.variant != variant:
                if current is not None:
                    current.stop()
                log(f"starting the {variant} server ({args.tree} tree)")
                try:
                    current = Server(
                        args.work, args.tree, variant, args.port, out / f"server-{variant}.log", recipe
                    )
                except PortTaken as error:
                    log(f"error: {error}")
                    return 2
                try:
                    ready = current.wait_ready(args.start_timeout)
                except RuntimeError as error:
                    failed = {"name": name, "variant": variant, "exit": 2, "error": str(error)}
                    if current.restarts:
                        failed["server_restarts"] = current.restarts
                    record(failed)
                    current.stop()
                    current = None
                    failed_variants.add(variant)
                    continue
                restarted = f" (started {len(current.restarts) + 1} times)" if current.restarts else ""
                log(f"{variant} server ready after {ready:.0f} s{restarted}")
                meta = meta_sample(args.port, list(range(300, 340)))
                (out / f"meta-{variant}.json").write_text(json.dumps(meta, indent=1) + "\n")
                log(f"{variant} meta_info sample: {meta}")
            step_out = out / name
            step_out.mkdir(exist_ok=True)
            refs = {
                "short": out / "reference-no-spec" / "reference.json",
                "long": out / "reference-no-spec-long" / "reference.json",
            }
            step_values = dict(values, OUT=str(step_out), GOLDEN_DIR=str(args.golden_dir or out / "golden"))
            if reference:
                step_values["REF"] = str(refs[reference])
            step_values["REF_LONG"] = str(refs["long"])  # used only by batteries with longReference
            again = rerun_command if name in errored else (lambda command: command)
            results = [
                run_bitexact(again(fill(c, step_values)), args.work, args.tree, step_out / "bitexact.log")
                for c in commands
            ]
            worst = worst_exit(results)
            entry = {"name": name, "variant": variant, "tree": args.tree, "exit": worst, "results": results}
            if current.restarts:  # the server's pool-sizing failures before it started
                entry["server_restarts"] = current.restarts
            record(entry)
    finally:
        if current is not None:
            current.stop()
    return 0


if __name__ == "__main__":
    # SIGTERM (`timeout`, a job scheduler) unwinds like Ctrl-C: `finally` stops the server this run started.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    sys.exit(main())
