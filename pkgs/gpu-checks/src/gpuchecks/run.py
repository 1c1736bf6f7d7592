"""A whole run of the plan on this card: the kernel phase, the references, every battery on the patched
tree, the stock tree's stated expectations, and the golden checks; results written as they come.

Work is cut into jobs: the kernel phase, and one job per server (a tree and a variant) that starts the
server once, runs every pending step that server serves, and stops it. A battery's job waits for the job
that records its references (the same tree's no-spec server). With `lanes` > 1 the jobs run side by side,
each lane on a port of its own (base port + lane), servers starting `stagger_s` apart so that SGLang's
pool sizing (from the memory free at its start) does not race a neighbour's."""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuchecks import kernels
from gpuchecks.host import Host
from gpuchecks.plan import Plan, PlanError, Step, fill
from gpuchecks.results import INTERRUPTED, Verdicts, expectation_met, overall_exit, summary_lines, worst_exit
from gpuchecks.servers import PortTaken, Server, ServerFailed, answers, capacity, kill_group, log, meta_sample
from gpuchecks.trees import MANIFEST, Tree, TreeError

REFERENCE_FILE = "reference.json"
REFERENCE_VARIANT = "no-spec"


class RunError(RuntimeError):
    """The run cannot start (its inputs, its OUT folder); nothing was compared."""


@dataclass
class Inputs:
    plan: Plan
    recipe: Path
    trees: dict[str, Tree]
    golden_dir: Path
    out: Path
    port: int
    bitexact: list[str]
    python: list[str]
    kernel_checks: Path | None = None
    series: Path | None = None
    model_snapshot: Path | None = None
    lanes: int = 1
    start_timeout: float = 1800.0
    stagger_s: float = 25.0
    only: set[str] | None = None
    cwd: Path = field(default_factory=Path.cwd)
    kernel_env: dict[str, str] = field(default_factory=dict)
    settings_notes: list[str] = field(default_factory=list)

    def wanted(self, name: str) -> bool:
        return self.only is None or name in self.only


@dataclass
class Job:
    name: str
    tree: str
    variant: str | None  # None: the kernel phase
    steps: list[Step]
    deps: list[str] = field(default_factory=list)


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class Run:
    def __init__(self, inputs: Inputs, host: Host) -> None:
        self.i, self.host = inputs, host
        self.verdicts = Verdicts(inputs.out)
        self.stop = threading.Event()  # no new work: an interrupt, or a lane's unexpected error
        self.interrupted = threading.Event()
        self.start_lock = threading.Lock()
        self._live: set[Any] = set()  # servers and subprocesses to stop on an interrupt
        self._live_lock = threading.Lock()
        self._build_info: dict[str, Path | None] = {}
        self._build_lock = threading.Lock()

    # --- what runs -------------------------------------------------------------------------------------

    def tree_steps(self, tree: str) -> list[Step]:
        """The battery steps TREE runs: every battery on the patched tree; on the stock tree those whose
        plan states what stock must do."""
        batteries = [b for b in self.i.plan.batteries if self.i.wanted(b.name)]
        if tree == "stock":
            batteries = [b for b in batteries if b.stock in ("differs", "passes")]
        return batteries

    def jobs(self) -> list[Job]:
        plan, jobs = self.i.plan, []
        if "patched" in self.i.trees and self.i.wanted(plan.kernels_name):
            jobs.append(Job(plan.kernels_name, "patched", None, []))
        for tree in self.i.trees:
            steps = self.tree_steps(tree)
            kinds = sorted({k for s in steps for k in s.references}, key=["short", "long"].index)
            refs = [plan.references[k] for k in kinds]
            ref_job = f"{tree}:{REFERENCE_VARIANT}"
            if refs:
                jobs.append(Job(ref_job, tree, REFERENCE_VARIANT, refs))
            variants: dict[str, list[Step]] = {}
            for step in steps:
                variants.setdefault(step.variant, []).append(step)
            for variant, group in variants.items():
                deps = [ref_job] if any(s.references for s in group) else []
                jobs.append(Job(f"{tree}:{variant}", tree, variant, group, deps))
        return jobs

    # --- bookkeeping -----------------------------------------------------------------------------------

    def record(self, entry: dict[str, Any]) -> None:
        if self.interrupted.is_set():
            return  # an interrupted step is run again on resume, never recorded half done
        entry.setdefault("at", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        self.verdicts.record(entry)
        word = "left out" if entry.get("exit") is None else f"exit {entry['exit']}"
        log(f"{entry['tree']}/{entry['step']}: {word}")

    def step_entry(self, tree: str, step: Step, **fields: Any) -> dict[str, Any]:
        entry: dict[str, Any] = {"step": step.name, "tree": tree, "kind": step.kind, "variant": step.variant}
        entry.update(fields)
        if tree == "stock" and step.kind == "battery" and entry.get("exit") is not None:
            entry["expect"] = step.stock
            entry["met"] = expectation_met(step.stock, entry["exit"])
        return entry

    def build_info(self, tree: Tree) -> Path | None:
        """The launcher's account of TREE's build, once per tree (None where the launcher cannot say)."""
        with self._build_lock:
            if tree.name not in self._build_info:
                dest = self.i.out / tree.name / "build-info.json"
                dest.parent.mkdir(parents=True, exist_ok=True)
                try:
                    dest.write_text(tree.build_info(self.i.recipe))
                    self._build_info[tree.name] = dest
                except TreeError as error:
                    log(f"{tree.name}: no build info ({error})")
                    self._build_info[tree.name] = None
            return self._build_info[tree.name]

    # --- bitexact --------------------------------------------------------------------------------------

    def run_bitexact(
        self, command: list[str], tree: Tree, log_path: Path, env_extra: dict[str, str]
    ) -> dict[str, Any]:
        """One bitexact command (its argv starts with `bitexact`); exit code, summary (--json) and time."""
        argv = [*self.i.bitexact, *command[1:]]
        env = {**tree.env(), **env_extra}
        started = time.monotonic()
        with log_path.open("a") as stderr:
            stderr.write("+ " + " ".join(command) + "\n")
            stderr.flush()
            proc = subprocess.Popen(
                argv, cwd=self.i.cwd, env=env, stdout=subprocess.PIPE, stderr=stderr, text=True,
                start_new_session=True,
            )  # fmt: skip
            self._hold(proc)
            try:
                stdout, _ = proc.communicate()
            finally:
                self._release(proc)
        summary: Any
        if "--json" in command:
            try:
                summary = json.loads(stdout)
            except json.JSONDecodeError:
                summary = stdout[-2000:]
        else:
            summary = stdout.strip()[-2000:]
        return {
            "command": command,
            "exit": proc.returncode,
            "seconds": round(time.monotonic() - started, 1),
            "summary": summary,
        }

    def _hold(self, thing: Any) -> None:
        with self._live_lock:
            self._live.add(thing)

    def _release(self, thing: Any) -> None:
        with self._live_lock:
            self._live.discard(thing)

    def stop_everything(self) -> None:
        with self._live_lock:
            live = list(self._live)
        for thing in live:
            if isinstance(thing, Server):
                thing.stop()
            else:
                kill_group(thing.pid)

    # --- jobs ------------------------------------------------------------------------------------------

    def run_kernels(self, job: Job) -> None:
        if ("patched", job.name) in self.verdicts.done():
            log(f"patched/{job.name}: verdict already in {self.verdicts.path}, kept")
            return
        if self.i.kernel_checks is None:
            why = "no --kernel-checks given: the kernel phase is part of the plan"
            self.record({"step": job.name, "tree": "patched", "kind": "kernels", "exit": 2, "why": why})
            return
        log(f"{job.name}: the kernel checks on {self.host.capability} ({self.i.kernel_checks})")
        started = time.monotonic()
        entry = kernels.run(
            checks=self.i.kernel_checks,
            python=self.i.python,
            env=self.i.kernel_env,
            host=self.host,
            out=self.i.out / "patched" / job.name,
            live=(self._hold, self._release),
        )
        entry.update({"step": job.name, "tree": "patched", "kind": "kernels"})
        entry["seconds"] = round(time.monotonic() - started, 1)
        self.record(entry)

    def reference_problems(self, tree: str, step: Step) -> dict[str, tuple[str, bool]]:
        """{reference kind: (why it is missing, whether that is a left-out rather than an error)} of the
        references STEP needs."""
        latest, problems = self.verdicts.latest(), {}
        for kind in step.references:
            ref = self.i.plan.references[kind]
            entry = latest.get((tree, ref.name))
            if entry is None:
                problems[kind] = (f"the {kind} reference ({ref.name}) has no verdict", False)
            elif entry.get("exit") is None:
                problems[kind] = (
                    f"needs the {kind} reference, which was left out: {entry.get('left_out')}",
                    True,
                )
            elif entry.get("exit") != 0:
                why = f"the {kind} reference could not be recorded ({ref.name}: exit {entry.get('exit')})"
                problems[kind] = (why, False)
        return problems

    def run_group(self, job: Job, lane: int) -> None:
        tree = self.i.trees[job.tree]
        done = self.verdicts.done()
        pending = [s for s in job.steps if (job.tree, s.name) not in done]
        for step in job.steps:
            if step not in pending:
                log(f"{job.tree}/{step.name}: verdict already in {self.verdicts.path}, kept")
        runnable: list[tuple[Step, dict[str, str]]] = []
        for step in pending:
            problems = self.reference_problems(job.tree, step)
            errors = [why for why, left_out in problems.values() if not left_out]
            if errors:
                self.record(self.step_entry(job.tree, step, exit=2, error="; ".join(errors)))
            else:  # a reference left out leaves out the commands that compare with it
                runnable.append((step, {kind: why for kind, (why, _) in problems.items()}))
        if not runnable or self.stop.is_set():
            return
        port = self.i.port + lane
        tree_out = self.i.out / job.tree
        info_path = self.build_info(tree)
        try:
            server = self.start(tree, job.variant or "", port, tree_out / f"server-{job.variant}.log")
        except (PortTaken, ServerFailed, TreeError) as error:
            for step, _ in runnable:
                self.record(self.step_entry(job.tree, step, exit=2, error=str(error)))
            return
        try:
            holds = self.server_capacity(server, tree_out, job.variant or "")
            for step, missing in runnable:
                if self.stop.is_set():
                    return
                self.run_step(tree, step, port, info_path, server.restarts, holds, missing)
        finally:
            server.stop()
            self._release(server)

    def start(self, tree: Tree, variant: str, port: int, log_path: Path) -> Server:
        """VARIANT's server of TREE on PORT, ready; servers start STAGGER_S apart (or once the previous one
        is ready), so that no two size their pools at once."""
        argv, env = tree.server_command(self.i.recipe, variant, port)
        with self.start_lock:
            if self.stop.is_set():  # an interrupt's snapshot of live servers would miss this one
                raise ServerFailed(
                    f"the {tree.name} tree's {variant} server was not started: the run is stopping"
                )
            log(f"starting the {tree.name} tree's {variant} server on port {port}")
            server = Server(f"{tree.name} {variant}", argv, env, port, log_path, cwd=self.i.cwd)
            self._hold(server)
        try:
            with self.start_lock:
                limit = time.monotonic() + self.i.stagger_s
                # Hold the start lock until this server is ready or STAGGER_S passed, whichever is first.
                while time.monotonic() < limit and server.proc.poll() is None and not self.stop.is_set():
                    if answers(f"http://127.0.0.1:{port}/health_generate"):
                        break
                    time.sleep(1)
            ready = server.wait_ready(self.i.start_timeout, stopped=self.stop.is_set)
        except BaseException:
            # a start that failed, timed out or was given up leaves no server behind
            server.stop()
            self._release(server)
            raise
        restarted = f" (started {len(server.restarts) + 1} times)" if server.restarts else ""
        log(f"the {tree.name} tree's {variant} server is ready after {ready:.0f} s{restarted}")
        return server

    def server_capacity(self, server: Server, tree_out: Path, variant: str) -> int | None:
        try:
            info = server.info()
            (tree_out / f"server-info-{variant}.json").write_text(
                json.dumps(info, indent=1, default=str) + "\n"
            )
            meta = meta_sample(server.port, list(range(300, 340)))
            (tree_out / f"meta-{variant}.json").write_text(json.dumps(meta, indent=1) + "\n")
        except (OSError, ValueError, KeyError, ServerFailed) as error:
            log(
                f"{server.name}: /server_info or the meta sample failed ({error}); capacity unknown, every "
                "step runs"
            )
            return None
        return capacity(info)

    def left_out(self, step: Step, at: int, holds: int | None, missing: dict[str, str]) -> str | None:
        """Why command AT of STEP cannot run here (None: it can, or nothing says otherwise): a reference it
        compares with was left out, or it needs more tokens in one request than the server holds."""
        command = step.commands[at]
        uses = {step.reference} if any("@REF@" in a for a in command) else set()
        uses |= {"long"} if any("@REF_LONG@" in a for a in command) else set()
        gone = sorted(k for k in uses if k in missing)
        if gone:
            return missing[gone[0]]
        needs = step.command_needs[at] if at < len(step.command_needs) else None
        if needs is None or holds is None or needs <= holds:
            return None
        return (
            f"needs {needs} tokens in one request; the {step.variant} server holds {holds} on this card "
            f"({self.host.describe()}; /server_info's max_total_num_tokens and max_req_input_len)"
        )

    def run_step(
        self,
        tree: Tree,
        step: Step,
        port: int,
        info_path: Path | None,
        restarts: list[str],
        holds: int | None,
        missing: dict[str, str],
    ) -> None:
        step_out = self.i.out / tree.name / step.name
        step_out.mkdir(parents=True, exist_ok=True)
        values = {
            "URL": f"sglang+http://127.0.0.1:{port}",
            "RECIPE": str(self.i.recipe),
            "OUT": str(step_out),
            "GOLDEN_DIR": str(self.i.golden_dir),
        }
        if self.i.model_snapshot is not None:
            values["MODEL_SNAPSHOT"] = str(self.i.model_snapshot)
        if info_path is not None:
            values["BUILD_INFO"] = str(info_path)
        for kind in step.references:
            key = "REF" if kind == step.reference else "REF_LONG"
            values[key] = str(self.i.out / tree.name / self.i.plan.references[kind].name / REFERENCE_FILE)
        if step.long_reference:
            values["REF_LONG"] = str(
                self.i.out / tree.name / self.i.plan.references["long"].name / REFERENCE_FILE
            )
        env_extra = {"BITEXACT_BUILD_INFO": str(info_path)} if info_path else {}
        errored = (tree.name, step.name) in self.verdicts.latest()
        started = time.monotonic()
        results, left_out = [], []
        for at, command in enumerate(step.commands):
            why = self.left_out(step, at, holds, missing)
            if why is not None:
                left_out.append({"command": list(command), "left_out": why})
                continue
            try:
                filled = fill(command, values)
            except PlanError as error:
                results.append({"command": list(command), "exit": 2, "error": str(error)})
                continue
            if errored:
                filled = rerun_command(filled)
            results.append(self.run_bitexact(filled, tree, step_out / "bitexact.log", env_extra))
            if self.stop.is_set():
                return
        if not results:
            reasons = "; ".join(sorted({c["left_out"] for c in left_out}))
            self.record(
                self.step_entry(tree.name, step, exit=None, left_out=reasons, left_out_commands=left_out)
            )
            return
        entry = self.step_entry(
            tree.name, step, exit=worst_exit(results), results=results,
            seconds=round(time.monotonic() - started, 1),
        )  # fmt: skip
        if left_out:
            entry["left_out_commands"] = left_out
        if restarts:
            entry["server_restarts"] = list(restarts)
        self.record(entry)

    # --- the whole run ---------------------------------------------------------------------------------

    def execute(self) -> int:
        jobs = self.jobs()
        if not jobs:
            raise RunError("nothing to run: the plan and --only select no step")
        pending = list(jobs)
        finished: set[str] = set()
        cond = threading.Condition()
        failures: list[BaseException] = []

        def next_job() -> Job | None:
            for job in pending:
                if all(d in finished for d in job.deps):
                    return job
            return None

        def lane(number: int) -> None:
            while not self.stop.is_set():
                with cond:
                    while pending and next_job() is None and not self.stop.is_set():
                        cond.wait(1)
                    if not pending or self.stop.is_set():
                        return
                    job = next_job()
                    assert job is not None
                    pending.remove(job)
                try:
                    if job.variant is None:
                        self.run_kernels(job)
                    else:
                        self.run_group(job, number)
                except BaseException as error:  # noqa: BLE001 (kept and raised in the main thread)
                    failures.append(error)
                    self.stop.set()
                finally:
                    with cond:
                        finished.add(job.name)
                        cond.notify_all()

        threads = [threading.Thread(target=lane, args=(n,), daemon=True) for n in range(self.i.lanes)]
        for thread in threads:
            thread.start()
        interrupted = False
        try:
            for thread in threads:
                while thread.is_alive():
                    thread.join(0.5)
        except KeyboardInterrupt:
            interrupted = True
            log("interrupted: stopping the servers and commands of this run")
            self.interrupted.set()
            self.stop.set()
            self.stop_everything()
            for thread in threads:
                thread.join(60)
        finally:
            self.stop_everything()  # whatever a lane still held (a start that outlived the joins)
        if failures and not interrupted:
            raise failures[0]
        return self.finish(interrupted)

    def finish(self, interrupted: bool) -> int:
        entries = self.verdicts.entries()
        run_path = self.i.out / "run.json"
        run = json.loads(run_path.read_text())
        run["finished"] = not interrupted  # `summary` says so of a run that did not finish
        run_path.write_text(json.dumps(run, indent=1) + "\n")
        lines = summary_lines(run, entries, interrupted)
        (self.i.out / "summary.txt").write_text("\n".join(lines) + "\n")
        for line in lines:
            print(line, flush=True)
        return overall_exit(self.verdicts.latest().values(), interrupted)


def rerun_command(command: list[str]) -> list[str]:
    """A command of a step run again after an error: a `golden record` that wrote its golden before the
    step failed would refuse to replace it, so it is told to (--force; its --out resumes as before)."""
    if command[1:3] == ["golden", "record"] and "--force" not in command:
        return [*command, "--force"]
    return command


def identity(inputs: Inputs, host: Host) -> dict[str, Any]:
    """What a resumed run must share with the run that wrote OUT."""

    def tree_id(tree: Tree) -> dict[str, Any]:
        manifest = tree.site / MANIFEST
        return {
            "site": str(tree.site),
            "manifest_sha256": sha256_of(manifest) if manifest.is_file() else None,
        }

    series = sorted(inputs.series.glob("*.patch")) if inputs.series else []
    return {
        "plan_sha256": sha256_of(inputs.plan.path),
        "recipe_sha256": sha256_of(inputs.recipe),
        "trees": {name: tree_id(tree) for name, tree in sorted(inputs.trees.items())},
        "series_sha256": hashlib.sha256(b"".join(p.read_bytes() for p in series)).hexdigest(),
        "server_env": dict(sorted(next(iter(inputs.trees.values())).server_env.items())),
        "golden_dir": str(inputs.golden_dir),
        "card": host.slug,
    }


def prepare_out(inputs: Inputs, host: Host, extra: dict[str, Any]) -> None:
    """OUT/run.json: a new run's record, or the same inputs as the run being resumed (RunError if not)."""
    inputs.out.mkdir(parents=True, exist_ok=True)
    path = inputs.out / "run.json"
    ours = identity(inputs, host)
    if path.exists():
        try:
            theirs = json.loads(path.read_text()).get("identity", {})
        except (json.JSONDecodeError, AttributeError):
            raise RunError(f"{path} is not a run record; give another --out") from None
        differ = sorted(k for k in ours if ours[k] != theirs.get(k))
        if differ:
            raise RunError(
                f"--out {inputs.out} holds a run of other inputs ({', '.join(differ)} differ): a resume must "
                "run what the first run ran; give another --out for a new run"
            )
    record = {
        "identity": ours,
        "out": str(inputs.out),
        "plan": str(inputs.plan.path),
        "recipe": str(inputs.recipe),
        "golden_dir": str(inputs.golden_dir),
        "host": host.to_json(),
        "host_line": host.describe(),
        "host_settings_notes": inputs.settings_notes,
        "lanes": inputs.lanes,
        "port": inputs.port,
        **extra,
    }
    path.write_text(json.dumps(record, indent=1) + "\n")


def install_signal_handlers() -> Callable[[], None]:
    """SIGTERM (a job scheduler, `timeout`, Nix stopping a build) unwinds as Ctrl-C does; returns a
    function that restores the previous handler."""
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)

    def restore() -> None:
        signal.signal(signal.SIGTERM, previous)

    return restore


__all__ = ["INTERRUPTED", "Inputs", "Run", "RunError", "prepare_out", "overall_exit"]
