"""The runner's server guard (gpuchecks.servers `Server`, gpuchecks.ports; the lab starts its servers with
it too) with real processes on real ports: a taken port is refused naming its holder; readiness counts only
when the listener is the server this run started; SIGTERM and Ctrl-C stop that server (a server left by a
run cut short once answered a later run of another tree)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from checkhelpers.net_support import free_port
from gpuchecks import ports, servers

# A stand-in for SGLang's readiness endpoint: what servers.Server polls (GET /health_generate -> 200).
HEALTH_SERVER = textwrap.dedent(
    """
    import http.server, sys
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/health_generate" else 404)
            self.end_headers()
        def log_message(self, *args):
            pass
    http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
    """
)


def wait_listening(port: int, deadline_s: float = 10.0) -> None:
    until = time.monotonic() + deadline_s
    while ports.port_free(port):
        assert time.monotonic() < until, f"nothing listens on {port}"
        time.sleep(0.05)


def health_command(port: int) -> tuple[list[str], dict[str, str]]:
    return [sys.executable, "-c", HEALTH_SERVER, str(port)], dict(os.environ)


def test_a_taken_port_is_refused_naming_the_holder(tmp_path: Path) -> None:
    port = free_port()
    holder = subprocess.Popen([sys.executable, "-c", HEALTH_SERVER, str(port)])
    try:
        wait_listening(port)
        with pytest.raises(
            servers.PortTaken, match=rf"port {port} is taken \(pid {holder.pid}: .*-c"
        ) as caught:
            servers.Server("recipe", *health_command(port), port, tmp_path / "s.log")
        assert "choose another --port" in str(caught.value)
        assert ports.listeners(port) == {holder.pid: ports.listeners(port)[holder.pid]}
    finally:
        holder.kill()
        holder.wait()


def test_the_runners_own_server_is_ready_and_stops(tmp_path: Path) -> None:
    port = free_port()
    server = servers.Server("recipe", *health_command(port), port, tmp_path / "s.log")
    try:
        assert server.wait_ready(20) < 20
        assert ports.in_group(next(iter(ports.listeners(port))), server.proc.pid)
    finally:
        server.stop()
    assert server.proc.returncode is not None and ports.port_free(port)


def test_an_impostor_on_the_port_is_not_taken_for_the_server(tmp_path: Path) -> None:
    """The runner's own process never listens; another one answers on its port: not ready, named."""
    port = free_port()
    idle = ([sys.executable, "-c", "import time; time.sleep(60)"], dict(os.environ))
    server = servers.Server("recipe", *idle, port, tmp_path / "s.log")
    impostor = subprocess.Popen([sys.executable, "-c", HEALTH_SERVER, str(port)])
    try:
        wait_listening(port)
        with pytest.raises(
            RuntimeError, match=rf"not from the recipe server this run started.*pid {impostor.pid}"
        ):
            server.wait_ready(3)
    finally:
        server.stop()
        impostor.kill()
        impostor.wait()


RUNNER = textwrap.dedent(
    """
    import os, signal, sys
    from gpuchecks import servers
    from pathlib import Path
    port, log = int(sys.argv[2]), Path(sys.argv[3])
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # as the runner does
    argv = [sys.executable, "-c", sys.argv[4], str(port)]
    server = servers.Server("recipe", argv, dict(os.environ), port, log)
    try:
        server.wait_ready(20)
        print(server.proc.pid, flush=True)
        signal.pause()
    finally:
        server.stop()
    """
)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_to_the_runner_stops_its_server(tmp_path: Path, sig: signal.Signals) -> None:
    port = free_port()
    runner = subprocess.Popen(
        [
            sys.executable,
            "-c",
            RUNNER,
            "-",
            str(port),
            str(tmp_path / "s.log"),
            HEALTH_SERVER,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # Ctrl-C's default in the runner even when this suite inherited SIGINT ignored (started in the
        # background of a shell without job control): else Python never raises KeyboardInterrupt there
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert runner.stdout is not None
    server_pid = int(runner.stdout.readline())
    runner.send_signal(sig)
    runner.wait(timeout=40)
    with pytest.raises(ProcessLookupError):
        os.kill(server_pid, 0)
    assert ports.port_free(port)


# A server that fails its first FAILS starts as SGLang 0.5.20's pool sizing does (the message of
# kv_cache_configurator.py's `_profile_available_bytes`, copied from the H200 log of 2026-12-03), then
# serves; the count of starts is kept in a file beside it.
FLAKY_POOL_SERVER = textwrap.dedent(
    """
    import pathlib, sys
    count = pathlib.Path(sys.argv[2])
    starts = int(count.read_text()) + 1 if count.exists() else 1
    count.write_text(str(starts))
    if starts <= int(sys.argv[3]):
        print("ValueError: " + sys.argv[4] + " under --mem-fraction-static=0.15. Raise --mem-fraction-static "
              "above 0.159", flush=True)
        sys.exit(1)
    if sys.argv[6] == "then-fail":
        print("RuntimeError: CUDA error: an illegal memory access was encountered", flush=True)
        sys.exit(1)
    exec(sys.argv[5])
    """
)


def flaky_server(
    tmp_path: Path, port: int, fails: int, message: str, then: str = "then-serve"
) -> servers.Server:
    argv = [sys.executable, "-c", FLAKY_POOL_SERVER, str(port), str(tmp_path / "starts"), str(fails)]
    argv += [message, HEALTH_SERVER, then]
    server = servers.Server("recipe", argv, dict(os.environ), port, tmp_path / "s.log")
    server.pool_sizing_pause_s = 0.0
    return server


def test_a_start_that_fails_in_pool_sizing_is_started_again_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port = free_port()
    server = flaky_server(tmp_path, port, 1, servers.POOL_SIZING_FAILURES[0])
    try:
        assert server.wait_ready(20) < 20
    finally:
        server.stop()
    assert (tmp_path / "starts").read_text() == "2"
    assert server.restarts == [servers.POOL_SIZING_FAILURES[0]]
    log = (tmp_path / "s.log").read_text()
    assert log.count("=== bitexact-gpu-checks: ") == 1 and "failed in SGLang's pool sizing" in log
    assert "restart 1 of at most 2" in log
    said = capsys.readouterr()
    assert "starting it again" in said.out + said.err  # the runner's log line


def test_pool_sizing_that_keeps_failing_is_an_error_naming_the_tries(tmp_path: Path) -> None:
    server = flaky_server(tmp_path, free_port(), 9, servers.POOL_SIZING_FAILURES[1])
    try:
        with pytest.raises(RuntimeError, match=r"(?s)exited with 1 \(its start was tried 3 times\).*mamba"):
            server.wait_ready(20)
    finally:
        server.stop()
    assert (tmp_path / "starts").read_text() == "3"


def test_any_other_failed_start_is_not_started_again(tmp_path: Path) -> None:
    server = flaky_server(tmp_path, free_port(), 1, "CUDA error: out of memory")
    try:
        with pytest.raises(RuntimeError, match=r"(?s)exited with 1: .*CUDA error") as caught:
            server.wait_ready(20)
    finally:
        server.stop()
    assert "tried" not in str(caught.value) and (tmp_path / "starts").read_text() == "1"


def test_only_the_latest_starts_log_decides_a_restart(tmp_path: Path) -> None:
    """The first start fails in pool sizing, the second another way: the second is not restarted,
    though the shared log still holds the first start's pool-sizing message."""
    server = flaky_server(tmp_path, free_port(), 1, servers.POOL_SIZING_FAILURES[0], "then-fail")
    try:
        with pytest.raises(RuntimeError, match=r"(?s)exited with 1 \(its start was tried 2 times\).*illegal"):
            server.wait_ready(20)
    finally:
        server.stop()
    assert (tmp_path / "starts").read_text() == "2" and len(server.restarts) == 1


def test_no_restart_once_the_callers_time_is_spent(tmp_path: Path) -> None:
    """TIMEOUT_S counts from the first start: with less time left than the pause, no restart."""
    server = flaky_server(tmp_path, free_port(), 1, servers.POOL_SIZING_FAILURES[0])
    server.pool_sizing_pause_s = 60.0
    try:
        with pytest.raises(RuntimeError, match=r"exited with 1: "):
            server.wait_ready(20)
    finally:
        server.stop()
    assert (tmp_path / "starts").read_text() == "1" and server.restarts == []
