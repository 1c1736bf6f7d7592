"""N replicas of one launch behind SGLang's own router (`sglang_router.launch_router`), and their supervision.

Every replica runs the launch's argv and environment with two changes only: its port, and where several
share a GPU, its share of the recipe's `--mem-fraction-static` (SGLang 0.5.20 sizes its pools from the
memory free at its start, so k replicas at the recipe's fraction would each claim it of the whole card:
they start in turn, each with the share that leaves all k the same part); a replica on another GPU than
0 gets `--base-gpu-id`. Which settings may move numerics is what the capacity
batteries measure; the router and replica runs (checks/e2e/router.py) show the answers do not move.
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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

MEM_FLAG = "--mem-fraction-static"
GPU_FLAG = "--base-gpu-id"
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


def _replace(argv: list[str], flag: str, value: str) -> list[str]:
    out = list(argv)
    if flag in out:
        out[out.index(flag) + 1] = value
    else:
        out += [flag, value]
    return out


def replica_argv(argv: Sequence[str], port: int, gpu: str, sharing: int, fraction: float | None) -> list[str]:
    """One replica's argv: the launch's with its own port, GPU and memory share."""
    out = _replace(list(argv), "--port", str(port))
    if gpu != "0":
        out = _replace(out, GPU_FLAG, gpu)
    if sharing > 1:
        if fraction is None:
            raise FleetError(
                f"{sharing} replicas share GPU {gpu}, but the recipe sets no {MEM_FLAG} to divide among them"
            )
        out = _replace(out, MEM_FLAG, f"{fraction:.4g}")
    return out


def fleet_plan(
    argv: Sequence[str],
    env: Mapping[str, str],
    python: str,
    replicas: int,
    gpus: Sequence[str],
    host: str,
    port: int,
    policy: str,
) -> tuple[list[Process], Process]:
    """The replicas (ports port+1..port+N, GPUs assigned in turn) and the router on `port`."""
    if replicas < 1:
        raise FleetError(f"--replicas {replicas}: at least one replica")
    if policy not in POLICIES:
        raise FleetError(f"--router-policy {policy!r}: one of {', '.join(POLICIES)}")
    if not gpus:
        raise FleetError("--gpus names no GPU")
    if port + replicas > 65535:
        raise FleetError(
            f"--port {port} leaves no room for {replicas} replicas (ports {port + 1}-{port + replicas})"
        )
    fraction = float(argv[list(argv).index(MEM_FLAG) + 1]) if MEM_FLAG in argv else None
    # Where the router and the readiness checks reach the replicas: a wildcard bind is reached locally.
    reach = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    assigned = [gpus[i % len(gpus)] for i in range(replicas)]
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
                url=f"http://{reach}:{replica_port}",
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
        url=f"http://{reach}:{port}",
    )
    return procs, router


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


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m exactlaunch.fleet PLAN.json [LOG_DIR]`: run the fleet a `bitexact-server --replicas N
    --print` printed (its `fleet` part), as the stock tree is run from its printed argv: the launcher's
    preflight rightly refuses a tree without the series."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or len(args) > 2:
        print("usage: python -m exactlaunch.fleet PLAN.json [LOG_DIR]", file=sys.stderr)
        return 2
    try:
        printed = json.loads(Path(args[0]).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        print(
            f"{args[0]}: cannot read the plan ({error}); `bitexact-server --replicas N --print` writes one",
            file=sys.stderr,
        )
        return 2
    if not isinstance(printed, dict) or "fleet" not in printed:
        print(
            f"{args[0]}: no `fleet` in it: print it with `bitexact-server --replicas N --print`",
            file=sys.stderr,
        )
        return 2
    part = printed["fleet"]
    replicas = [Process(**p) for p in part["replicas"]]
    router = Process(**part["router"])
    return supervise(replicas, router, dict(os.environ), Path(args[1]) if len(args) == 2 else None)


if __name__ == "__main__":
    sys.exit(main())
