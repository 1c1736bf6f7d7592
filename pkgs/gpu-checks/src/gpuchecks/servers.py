"""One SGLang server process: its own process group, its log, readiness through /health_generate, what it
says it can hold (/server_info), and a stop on every exit path.

The lab starts its servers with this class too (lab/perf/run.py), so what the checks prove and what the
lab measures start the same way."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpuchecks import ports

# SGLang 0.5.20 sizes its pools from the GPU memory free before its weights load against what is free
# after (kv_cache_configurator.py, `_profile_available_bytes` and `_handle_max_mamba_cache`): a neighbour
# that allocates in between makes the start fail with one of these, though the same start alone fits.
POOL_SIZING_FAILURES = (
    "Loaded weights leave no GPU memory for the KV cache",
    "Not enough GPU memory for hybrid (mamba/linear-attention) state cache",
)


class PortTaken(RuntimeError):
    """The port is held by another process: a server left by an earlier run, or someone else's."""


class ServerFailed(RuntimeError):
    """The server exited, or was not ready in time; the message ends with its log's last lines."""


def port_taken(port: int) -> str:
    return (
        f"port {port} is taken ({ports.describe(ports.listeners(port))}): a server left by an earlier run, "
        "or another program; stop it (kill the pid) or choose another --port"
    )


def log(message: str) -> None:
    """Progress on stderr, one timestamped line."""
    import sys

    print(f"[gpu-checks {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class Server:
    """A server started from (argv, env) in its own process group. It refuses a port another process
    holds, and is ready only when the process listening on the port is its own. A start that fails in
    SGLang's pool sizing (POOL_SIZING_FAILURES) is started again after a pause, at most
    `pool_sizing_retries` times, each one logged and listed in `restarts`."""

    pool_sizing_retries = 2
    pool_sizing_pause_s = 30.0

    def __init__(
        self,
        name: str,
        argv: list[str],
        env: dict[str, str],
        port: int,
        log_path: Path,
        cwd: Path | None = None,
    ) -> None:
        self.name, self.argv, self.env, self.port, self.log_path = name, argv, env, port, log_path
        self.cwd = cwd
        if not ports.port_free(port):
            raise PortTaken(port_taken(port))
        self.restarts: list[str] = []
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self.log_file = log_path.open("a")
        self._launch()

    def _launch(self) -> None:
        self.log_file.write("+ " + " ".join(self.argv) + "\n")
        self.log_file.flush()
        self.log_start = self.log_file.tell()
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            self.argv,
            cwd=self.cwd,
            env=self.env,
            stdout=self.log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def pool_sizing_failure(self) -> str | None:
        """The pool-sizing message the latest start's log holds, or None."""
        with self.log_path.open("rb") as f:
            f.seek(self.log_start)
            text = f.read().decode(errors="replace")
        return next((sign for sign in POOL_SIZING_FAILURES if sign in text), None)

    def wait_ready(
        self,
        timeout_s: float,
        sleep: Callable[[float], None] = time.sleep,
        stopped: Callable[[], bool] = lambda: False,
    ) -> float:
        """Seconds from the latest start to readiness. TIMEOUT_S counts from the first start, restarts
        included, so that a caller's time budget holds; a restart is tried only while time is left.
        `stopped` says when the caller gives up (an interrupted run): ServerFailed at once."""
        url = f"http://127.0.0.1:{self.port}/health_generate"
        deadline = self.started + timeout_s
        while time.monotonic() < deadline:
            if stopped():
                raise ServerFailed(f"the {self.name} server's start was given up: the run is stopping")
            if self.proc.poll() is not None:
                failure = self.pool_sizing_failure()
                time_left = deadline - time.monotonic() > self.pool_sizing_pause_s
                if failure and len(self.restarts) < self.pool_sizing_retries and time_left:
                    self.restarts.append(failure)
                    note = (
                        f"the {self.name} server failed in SGLang's pool sizing ({failure}; a neighbour "
                        f"allocated while it loaded?): starting it again in {self.pool_sizing_pause_s:.0f} s "
                        f"(restart {len(self.restarts)} of at most {self.pool_sizing_retries})"
                    )
                    log(note)
                    self.log_file.write(f"\n=== bitexact-gpu-checks: {note}\n")
                    self.log_file.flush()
                    kill_group(self.proc.pid)  # what the failed start left of its process group
                    sleep(self.pool_sizing_pause_s)
                    self._launch()
                    continue
                raise ServerFailed(
                    f"the {self.name} server exited with {self.proc.returncode}{self._tried()}: {self.tail()}"
                )
            if answers(url):
                self.check_listener()
                return time.monotonic() - self.started
            sleep(1)
        raise ServerFailed(
            f"the {self.name} server was not ready after {timeout_s:.0f} s{self._tried()}: {self.tail()}"
        )

    def _tried(self) -> str:
        return f" (its start was tried {len(self.restarts) + 1} times)" if self.restarts else ""

    def check_listener(self) -> None:
        """The process listening on the port belongs to this server's process group, or ServerFailed."""
        holders = ports.listeners(self.port)
        if not holders or not all(ports.in_group(pid, self.proc.pid) for pid in holders):
            raise ServerFailed(
                f"port {self.port} answers, but not from the {self.name} server this run started (pid "
                f"{self.proc.pid}): it is held by {ports.describe(holders)}; stop that process"
            )

    def info(self) -> dict[str, Any]:
        """SGLang's /server_info: its settings as resolved and what its pools hold (max_total_num_tokens,
        max_req_input_len)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/server_info", timeout=30) as answer:
            data = json.load(answer)
        if not isinstance(data, dict):
            raise ServerFailed(f"the {self.name} server's /server_info is not an object")
        return data

    def tail(self, lines: int = 40) -> str:
        text = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])

    def stop(self) -> None:
        stop_group(self.proc, 30)
        self.log_file.close()


def capacity(info: dict[str, Any]) -> int | None:
    """The longest request (prompt and new tokens) the server can hold: the smaller of its KV pool and its
    longest input, as /server_info reports them; None when it reports neither."""
    sizes = [info.get(key) for key in ("max_total_num_tokens", "max_req_input_len")]
    known = [v for v in sizes if isinstance(v, int) and not isinstance(v, bool) and v > 0]
    return min(known) if known else None


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
    `grace_s` seconds; then what is left of the group (children that outlived their leader)."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            kill_group(proc.pid)
            proc.wait()
    kill_group(proc.pid)


def meta_sample(port: int, ids: list[int], max_new_tokens: int = 64) -> dict[str, Any]:
    """One /generate answer's meta_info: the server's own account of speculation (verify steps, accepted
    drafts, accept length), kept beside each server's log."""
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
