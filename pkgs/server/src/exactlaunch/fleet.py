"""N replicas of one launch behind SGLang's own router (`sglang_router.launch_router`), and their supervision.

Every replica runs the launch's argv and environment with two changes only: its port, and where several
share a GPU, its share of the recipe's `--mem-fraction-static` (SGLang 0.5.20 sizes its pools from the
memory free at its start, so k replicas at the recipe's fraction would each claim it of the whole card:
they start in turn, each with the share that leaves all k the same part); a replica on another GPU than
0 gets `--base-gpu-id`. Which settings may move numerics is what the capacity
batteries measure; the router and replica runs (lab/perf/router.py) show the answers do not move.
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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import exactformats
from exactformats import strictjson
from exactformats.crash import one_line

from exactlaunch import values
from exactlaunch.recipe import RecipeError, set_flag

MEM_FLAG = "--mem-fraction-static"
GPU_FLAG = "--base-gpu-id"
T = TypeVar("T")
POLICIES = ("round_robin", "random", "cache_aware", "power_of_two")


class FleetError(RuntimeError):
    """A replica or the router did not start, or one of them stopped."""


@dataclass
class Process:
    name: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)  # what the launch sets (the caller's env aside)
    url: str = ""

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "argv": self.argv, "env": self.env, "url": self.url}


def _set(argv: list[str], flag: str, value: str) -> list[str]:
    try:
        return set_flag(argv, flag, value)
    except RecipeError as error:
        raise FleetError(f"the launch's argv: {error}") from None


def replica_argv(argv: Sequence[str], port: int, gpu: str, sharing: int, fraction: float | None) -> list[str]:
    """One replica's argv: the launch's with its own port, GPU and memory share."""
    out = _set(list(argv), "--port", str(port))
    if gpu != "0":
        out = _set(out, GPU_FLAG, gpu)
    if sharing > 1:
        if fraction is None:
            raise FleetError(
                f"{sharing} replicas share GPU {gpu}, but the recipe sets no {MEM_FLAG} to divide among them"
            )
        share = f"{fraction:.4g}"
        try:
            values.fraction(share)
        except values.BadValue:
            raise FleetError(
                f"{MEM_FLAG}: a replica's share of GPU {gpu} rounds to {share}, not a fraction below 1; "
                "give the replicas GPUs of their own (--gpus) or lower the recipe's fraction"
            ) from None
        out = _set(out, MEM_FLAG, share)
    return out


def replica_gpu(argv: Sequence[str]) -> str:
    """The GPU a replica's argv puts it on (its --base-gpu-id, 0 without one)."""
    at = [i for i, item in enumerate(argv) if item == GPU_FLAG]
    return argv[at[-1] + 1] if at and at[-1] + 1 < len(argv) else "0"


def memory_fraction(argv: Sequence[str]) -> float | None:
    """The launch's --mem-fraction-static (its last occurrence, as SGLang's argparse takes it)."""
    at = [i for i, item in enumerate(argv) if item == MEM_FLAG]
    if not at:
        return None
    text = argv[at[-1] + 1] if at[-1] + 1 < len(argv) else ""
    try:
        return values.fraction(text)
    except values.BadValue as error:
        raise FleetError(
            f"replicas sharing a GPU divide the argv's {MEM_FLAG}, but {error}; fix the recipe or the "
            "variant, or give each replica a GPU of its own (--gpus)"
        ) from None


def fleet_plan(
    argv: Sequence[str],
    env: Mapping[str, str],
    python: str,
    replicas: int,
    gpus: str,
    host: str,
    port: int | str,
    policy: str,
) -> tuple[list[Process], Process]:
    """The replicas (ports port+1..port+N, GPUs assigned in turn) and the router on `port`. Every value
    is checked here (`gpus` as given to --gpus), so `--print` and a start refuse the same fleets."""
    if replicas < 1:
        raise FleetError(f"--replicas {replicas}: at least one replica")
    if policy not in POLICIES:
        raise FleetError(f"--router-policy {policy!r}: one of {', '.join(POLICIES)}")
    ids = _checked("--gpus", values.gpu_ids, gpus)
    _checked("--host", values.host, host)
    port = _checked("--port", values.port, str(port))
    if len(ids) > replicas:
        raise FleetError(
            f"--gpus {gpus} names {len(ids)} GPUs for {replicas} replica(s): GPU {', '.join(ids[replicas:])} "
            "would serve nothing; give one GPU per replica at most"
        )
    if port + replicas > 65535:
        raise FleetError(
            f"--port {port} leaves no room for {replicas} replicas (ports {port + 1}-{port + replicas})"
        )
    # Where the router and the readiness checks reach the replicas: a wildcard bind is reached locally.
    reach = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    assigned = [ids[i % len(ids)] for i in range(replicas)]
    shared = any(assigned.count(gpu) > 1 for gpu in ids)
    fraction = memory_fraction(argv) if shared else None
    procs = []
    for i, gpu in enumerate(assigned):
        replica_port = port + 1 + i
        # Replicas start one after another; the j-th of k on a GPU sees 1 - j*f/k of it free and takes
        # the share that leaves each f/k of the card: (f/k) / (1 - j*f/k).
        j, k = assigned[:i].count(gpu), assigned.count(gpu)
        share = None if fraction is None else (fraction / k) / (1 - j * fraction / k)
        procs.append(
            Process(
                name=f"replica-{i}",
                argv=replica_argv(argv, replica_port, gpu, k, share),
                env=dict(env),
                url=f"http://{_url_host(reach)}:{replica_port}",
            )
        )
    router = Process(
        name="router",
        argv=[
            python,
            "-m",
            "sglang_router.launch_router",
            "--worker-urls",
            *(p.url for p in procs),
            "--policy",
            policy,
            "--host",
            host,
            "--port",
            str(port),
            # The replicas are ready before the router starts; its default waits 30 s between looks.
            "--worker-startup-check-interval",
            "1",
        ],
        url=f"http://{_url_host(reach)}:{port}",
    )
    return procs, router


def _checked(option: str, kind: Callable[[str], T], text: str) -> T:
    try:
        return kind(text)
    except values.BadValue as error:
        raise FleetError(f"{option}: {error}") from None


def _url_host(host: str) -> str:
    """An IPv6 address in a URL is bracketed (RFC 3986)."""
    return f"[{host}]" if ":" in host else host


def _ready(url: str, path: str) -> bool:
    try:
        with urllib.request.urlopen(url + path, timeout=10) as answer:
            return bool(answer.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _say(message: str) -> None:
    print(f"bitexact-server: fleet: {message}", file=sys.stderr, flush=True)


def supervise(
    replicas: Sequence[Process],
    router: Process,
    base_env: Mapping[str, str],
    log_dir: Path | None = None,
    timeout_s: float = 1800.0,
) -> int:
    """Start the replicas, wait until each answers /health_generate, start the router, wait until it answers
    /health; then wait. Any of them exiting, SIGTERM or SIGINT stops them all (each in its own process
    group); the exit code is 0 only for a stop that was asked for. With `log_dir`, each one's output goes
    to `<log_dir>/<name>.log` (which replica served what can then be read per replica)."""
    started: list[tuple[Process, subprocess.Popen[bytes]]] = []
    if log_dir is not None:
        log_dir.mkdir(parents=True, exist_ok=True)

    def stop_all() -> None:
        for _, proc in started:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        for _, proc in started:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

    def start(p: Process) -> None:
        _say(f"starting {p.name} at {p.url}: {' '.join(p.argv)}")
        output = None if log_dir is None else (log_dir / f"{p.name}.log").open("ab")
        proc = subprocess.Popen(
            p.argv,
            env={**base_env, **p.env},
            stdout=output,
            stderr=subprocess.STDOUT if output else None,
            start_new_session=True,
        )
        started.append((p, proc))

    def wait_for(p: Process, path: str) -> None:
        begun = time.monotonic()
        while not _ready(p.url, path):
            for q, proc in started:
                if proc.poll() is not None:
                    raise FleetError(f"{q.name} exited with {proc.returncode} before the fleet was ready")
            if time.monotonic() - begun > timeout_s:
                raise FleetError(f"{p.name} was not ready at {p.url}{path} after {timeout_s:.0f} s")
            time.sleep(1)
        _say(f"{p.name} ready after {time.monotonic() - begun:.0f} s")

    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        # One at a time: each sizes its pools from the memory free at its start (see fleet_plan).
        for p in replicas:
            start(p)
            wait_for(p, "/health_generate")
        start(router)
        wait_for(router, "/health")
        _say(f"serving at {router.url} ({len(replicas)} replicas)")
        while True:
            for q, proc in started:
                if proc.poll() is not None:
                    raise FleetError(f"{q.name} exited with {proc.returncode}; stopping the others")
            time.sleep(1)
    except KeyboardInterrupt:
        _say("stopping (asked to)")
        return 0
    except FleetError as error:
        _say(f"error: {error}")
        return 2
    finally:
        stop_all()
        signal.signal(signal.SIGTERM, previous)


def plan_json(replicas: Sequence[Process], router: Process) -> str:
    return json.dumps({"replicas": [p.to_json() for p in replicas], "router": router.to_json()}, indent=2)


def _process(data: object, where: str) -> Process:
    if not isinstance(data, dict) or set(data) != {"name", "argv", "env", "url"}:
        raise FleetError(f"{where} must be an object with exactly name, argv, env and url")
    argv, env = data["argv"], data["env"]
    if not isinstance(data["name"], str) or not values.NAME.fullmatch(data["name"]):
        raise FleetError(f"{where}.name must be a name such as replica-0 (it names the log file)")
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) and "\0" not in a for a in argv):
        raise FleetError(f"{where}.argv must be a non-empty list of strings")
    if not isinstance(env, dict) or not all(
        isinstance(k, str) and values.ENV_NAME.fullmatch(k) and isinstance(v, str) and "\0" not in v
        for k, v in env.items()
    ):
        raise FleetError(f"{where}.env must map environment variable names to strings")
    if not isinstance(data["url"], str) or not data["url"].startswith("http://"):
        raise FleetError(f"{where}.url must be the http:// address it answers at")
    return Process(name=data["name"], argv=list(argv), env=dict(env), url=data["url"])


def read_plan(path: Path) -> tuple[list[Process], Process]:
    """The replicas and the router of a plan `bitexact-server --replicas N --print` printed."""
    fix = "`bitexact-server --replicas N --print` writes one"
    try:
        printed = strictjson.loads(
            exactformats.read_text(
                path, "plan", "the plan that `bitexact-server --replicas N --print` writes"
            )
        )
    except exactformats.FormatError as error:
        raise FleetError(str(error)) from None
    except strictjson.JsonProblem as error:
        raise FleetError(f"{path}: cannot read the plan ({error}); {fix}") from None
    if not isinstance(printed, dict) or "fleet" not in printed:
        raise FleetError(f"{path}: no `fleet` in it: print it with `bitexact-server --replicas N --print`")
    part = printed["fleet"]
    if (
        not isinstance(part, dict)
        or set(part) != {"replicas", "router"}
        or not isinstance(part["replicas"], list)
    ):
        raise FleetError(f"{path}: `fleet` must hold `replicas` (a list) and `router`; {fix}")
    replicas = [_process(p, f"{path}: fleet.replicas[{i}]") for i, p in enumerate(part["replicas"])]
    if not replicas:
        raise FleetError(f"{path}: the plan has no replicas; {fix}")
    names = [p.name for p in replicas]
    if len(set(names)) != len(names) or "router" in names:
        raise FleetError(f"{path}: two processes of the plan share a name (and so a log file)")
    return replicas, _process(part["router"], f"{path}: fleet.router")


def log_folder(path: Path) -> Path:
    """A folder for the logs: one that exists, or one that can be made (checked before anything starts)."""
    try:
        return values.folder_to_make(path)
    except values.BadValue as error:
        raise FleetError(f"log folder: {error}; give a folder (it is made if absent)") from None


@one_line("python -m exactlaunch.fleet")
def main(argv: Sequence[str] | None = None) -> int:
    """`python -m exactlaunch.fleet PLAN.json [LOG_DIR]`: run the fleet a `bitexact-server --replicas N
    --print` printed (its `fleet` part), as the stock tree is run from its printed argv: the launcher's
    preflight rightly refuses a tree without the series."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or len(args) > 2:
        print("usage: python -m exactlaunch.fleet PLAN.json [LOG_DIR]", file=sys.stderr)
        return 2
    try:
        replicas, router = read_plan(Path(args[0]))
        log_dir = log_folder(Path(args[1])) if len(args) == 2 else None
    except FleetError as error:
        print(str(error), file=sys.stderr)
        return 2
    return supervise(replicas, router, dict(os.environ), log_dir)


if __name__ == "__main__":
    sys.exit(main())
