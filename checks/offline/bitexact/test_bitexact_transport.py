"""Transport failures against a local server in SGLang's shape (bx_fake_servers.py): bodies cut short,
resets and 5xx are retried; exhausted retries stop with what finished kept and a rerun redoes only the
rest; a hung server is noticed (a stall warning, a timeout sized to the work); Ctrl-C exits 130 with
every finished result kept."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
from bitexact import runner
from bitexact.engines.base import Settings
from bitexact.engines.sglang_http import SGLangHttpEngine
from bitexact.engines.sglang_shapes import request_fields
from bitexact.engines.spec import parse_engine
from bitexact.prompts import Prompt
from checkhelpers.bx_cli import parity_argv, prompt_id, rows, run, spawn
from checkhelpers.bx_fake_servers import Backend, FakeServer
from checkhelpers.bx_tiny_models import make_model


@pytest.fixture(scope="module")
def backend(models) -> Backend:
    return Backend(models["target"])


@pytest.fixture(scope="session")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("transport-models")
    return {"target": make_model(root / "target", layers=2, hidden=64, seed=0)}


@pytest.mark.parametrize(
    ("fault", "said"),
    [("truncate", "IncompleteRead"), ("500", "HTTP 500"), ("reset", "RemoteDisconnected")],
)
def test_transport_failures_are_retried(fault, said, backend, models, prompt_file, tmp_path, capsys):
    """The first two requests fail this way; their retries succeed and nothing is lost or doubled."""
    with FakeServer(backend, fault=lambda n, body: fault if n < 2 else None) as server:
        a = f"sglang+http://127.0.0.1:{server.port}"
        rc, summary, err = run(capsys, parity_argv(a, f"hf:{models['target']}", prompt_file, tmp_path / "o"))
    assert rc == 0, err
    assert summary["equal"] == 6
    assert server.attempts == 8 and server.served == 6
    assert err.count("retry in") == 2 and said in err


def test_exhausted_retries_keep_every_finished_result_in_flight(
    backend, models, prompt_file, tmp_path, capsys
):
    """Six requests in flight: p2's answer is always cut short and fails at once; the other five
    answer later. All five are stored, the run stops with exit 2 saying so, and the rerun stores p2
    only (it sends the whole group again, so that p2 runs in the same company as the first time)."""
    out = tmp_path / "o"
    with FakeServer(
        backend,
        fault=lambda n, body: "truncate" if prompt_id(body) == "p2" else None,
        delay=lambda body: 0.5,
    ) as server:
        a = f"sglang+http://127.0.0.1:{server.port}?retries=1"
        argv = parity_argv(a, f"hf:{models['target']}", prompt_file, out, "--inflight-a", "6")
        server.backend = backend
        rc, summary, err = run(capsys, argv)
        assert rc == 2
        assert "stopped: 5/6 results kept" in err and "rerun the same command to resume" in err
        assert "IncompleteRead" in err and "Traceback" not in err
        (path,) = out.glob("A-*.jsonl")
        assert sorted(r["id"] for r in rows(path)) == ["p0", "p1", "p3", "p4", "p5"]
        server.fault = None
        rc, summary, err = run(capsys, argv)
        assert rc == 0 and summary["equal"] == 6 and "(resumed)" in err
        ids = [r["id"] for r in rows(path)]
        assert sorted(ids[:5]) == ["p0", "p1", "p3", "p4", "p5"] and ids[5:] == ["p2"]


def test_default_timeout_is_sized_to_the_work():
    from bitexact.engines.http import request_timeout

    short = request_timeout(prompt_tokens=30, new_tokens=64)
    assert 60 <= short <= 120  # minutes at most, not 3600 s per attempt
    assert request_timeout(131072, 64) > request_timeout(2200, 64) > short
    assert request_timeout(30, 2048) > short
    assert request_timeout(2200, 64, inflight=8) > request_timeout(2200, 64)
    engine = SGLangHttpEngine(parse_engine("sglang+http://127.0.0.1:30000"), inflight=1)
    body = request_fields(Prompt("x", input_ids=tuple(range(30))), Settings(max_new_tokens=64))
    assert engine.client.timeout_for(body) == short
    pinned = SGLangHttpEngine(parse_engine("sglang+http://127.0.0.1:30000?timeout=7"))
    assert pinned.client.timeout_for(body) == 7.0


def test_a_hung_server_is_reported_while_waiting_then_times_out(
    backend, models, prompt_file, tmp_path, capsys, monkeypatch
):
    monkeypatch.setattr(runner, "STALL_S", 0.4, raising=False)
    with FakeServer(backend, fault=lambda n, body: "hang" if prompt_id(body) == "p1" else None) as server:
        a = f"sglang+http://127.0.0.1:{server.port}?timeout=2&retries=1"
        start = time.monotonic()
        rc, _, err = run(capsys, parity_argv(a, f"hf:{models['target']}", prompt_file, tmp_path / "o"))
    assert rc == 2 and time.monotonic() - start < 30
    assert "no result for" in err and "still waiting" in err
    assert "no complete answer within 2 s" in err and "stopped: 1/6 results kept" in err


def _wait_for_results(folder: Path, pattern: str, count: int, proc, deadline_s: float = 120) -> Path:
    """The results file once it holds `count` results (lines that carry a generation)."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        for path in folder.glob(pattern):
            if path.read_text().count('"generation"') >= count:
                return path
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    raise AssertionError(f"no {count} results within {deadline_s} s")


def test_sigint_exits_130_and_keeps_every_finished_result(backend, prompt_file, tmp_path):
    """A real SIGINT to a real process: five of six requests in flight have finished, one hangs."""
    out = tmp_path / "o"
    with (
        FakeServer(backend, fault=lambda n, body: "hang" if prompt_id(body) == "p4" else None) as a_server,
        FakeServer(backend) as b_server,
    ):
        a, b = f"sglang+http://127.0.0.1:{a_server.port}", f"sglang+http://127.0.0.1:{b_server.port}"
        argv = parity_argv(a, b, prompt_file, out, "--inflight-a", "6")
        proc = spawn(argv, tmp_path)
        path = _wait_for_results(out, "A-*.jsonl", 5, proc)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
        assert proc.returncode == 130, stderr
        assert "interrupted; 5/6 results kept" in stderr and "Traceback" not in stderr
        assert sorted(r["id"] for r in rows(path)) == ["p0", "p1", "p2", "p3", "p5"]
        a_server.fault = None
        proc = spawn(argv, tmp_path)
        stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    assert "(resumed)" in stderr
    assert sorted(r["id"] for r in rows(path)) == ["p0", "p1", "p2", "p3", "p4", "p5"]
    assert stdout.startswith("parity: EQUAL: 6/6 prompts equal")
