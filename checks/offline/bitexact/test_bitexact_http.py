"""The HTTP engines end to end against local servers that answer in SGLang's and vLLM's shapes
(bx_fake_servers.py cites the sources), backed by a real transformers model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bitexact.cli import main
from checkhelpers.bx_cli import rows
from checkhelpers.bx_fake_servers import Backend, FakeServer

RECIPE = Path(__file__).resolve().parents[3] / "nix" / "recipes" / "qwen3.8-27b-exact.json"
COMMON = ["--max-new-tokens", "6", "--top-logprobs", "4", "--json"]


@pytest.fixture(scope="module")
def backend(models) -> Backend:
    return Backend(models["target"])


@pytest.fixture(scope="session")
def models(tmp_path_factory):  # module-scoped backends need a session-scoped model; reuse conftest's maker
    from checkhelpers.bx_tiny_models import make_model

    root = tmp_path_factory.mktemp("http-models")
    return {"target": make_model(root / "target", layers=2, hidden=64, seed=0)}


def _run(capsys, argv: list[str]) -> tuple[int, dict, str]:
    rc = main(argv)
    captured = capsys.readouterr()
    return rc, (json.loads(captured.out) if captured.out.strip() else {}), captured.err


def _parity_argv(a: str, b: str, prompt_file: Path, out: Path, *extra: str) -> list[str]:
    """`bitexact parity A B` over the test prompts, writing to OUT, with the shared settings."""
    return ["parity", a, b, "--prompts", str(prompt_file), "--out", str(out), *extra, *COMMON]


def test_sglang_native_equals_transformers_and_sends_explicit_greedy_params(
    backend, models, prompt_file, tmp_path, capsys
):
    with FakeServer(backend) as server:
        a = f"sglang+http://127.0.0.1:{server.port}"
        rc, summary, _ = _run(capsys, _parity_argv(a, f"hf:{models['target']}", prompt_file, tmp_path / "o"))
    assert rc == 0, summary
    assert summary["equal"] == 6
    assert summary["a"]["identity"]["version"] == "0.5.20"
    body = server.requests[0]["body"]
    assert body["sampling_params"] == {
        "temperature": 0.0,
        "top_p": 1.0,
        "top_k": -1,
        "min_p": 0.0,
        "max_new_tokens": 6,
        "ignore_eos": True,
    }
    assert (body["return_logprob"], body["top_logprobs_num"], body["logprob_start_len"]) == (True, 4, -1)
    assert body["input_ids"] == json.loads(prompt_file.read_text().splitlines()[0])["input_ids"]


def test_spec_required_is_proven_from_meta_info(backend, prompt_file, tmp_path, capsys):
    with FakeServer(backend, spec=True) as on, FakeServer(backend, spec=False) as off:
        a, b = f"sglang+http://127.0.0.1:{on.port}", f"sglang+http://127.0.0.1:{off.port}"
        argv = ["--prompts", str(prompt_file), "--limit", "3", "--recipe", str(RECIPE), *COMMON]
        rc, summary, _ = _run(
            capsys, ["parity", a, b, "--preset", "forced-reject", "--out", str(tmp_path / "1"), *argv]
        )
        assert rc == 0
        assert summary["a"]["spec"]["ran"] == 3 and summary["a"]["spec"]["required"] == "must"
        assert summary["b"]["spec"]["required"] == "never"
        # the same preset with the servers swapped: A never speculated -> exit 2, never a pass
        rc, _, err = _run(
            capsys, ["parity", b, a, "--preset", "forced-reject", "--out", str(tmp_path / "2"), *argv]
        )
        assert rc == 2
        assert "speculation must run" in err


def test_preset_inflight_sends_requests_concurrently(backend, prompt_file, tmp_path, capsys):
    with FakeServer(backend, spec=True) as on, FakeServer(backend) as off:
        a, b = f"sglang+http://127.0.0.1:{on.port}", f"sglang+http://127.0.0.1:{off.port}"
        argv = _parity_argv(
            a, b, prompt_file, tmp_path / "o", "--preset", "inflight-8", "--recipe", str(RECIPE)
        )
        rc, summary, _ = _run(capsys, argv)
    assert rc == 0 and summary["equal"] == 6
    assert summary["title"].endswith("inflight-8 vs no-spec")


@pytest.mark.parametrize("flavor", ["sglang", "vllm"])
def test_openai_compatible_equals_transformers(flavor, backend, models, prompt_file, tmp_path, capsys):
    with FakeServer(backend, flavor=flavor, spec=flavor == "sglang") as server:
        a = f"openai+http://127.0.0.1:{server.port}/v1?model=tiny"
        spec = ["--spec-a", "must"] if flavor == "sglang" else []
        argv = _parity_argv(a, f"hf:{models['target']}", prompt_file, tmp_path / "o", *spec)
        rc, summary, _ = _run(capsys, argv)
    assert rc == 0, summary
    assert summary["equal"] == 6
    body = server.requests[0]["body"]
    assert (body["temperature"], body["logprobs"], body["return_token_ids"]) == (0.0, 4, True)


def test_server_dying_mid_run_keeps_results_and_resume_redoes_nothing(
    backend, models, prompt_file, tmp_path, capsys
):
    out = tmp_path / "o"
    with FakeServer(backend, die_after=3) as dying:
        port = dying.port
        a = f"sglang+http://127.0.0.1:{port}?retries=1"
        argv = _parity_argv(a, f"hf:{models['target']}", prompt_file, out)
        rc, _, err = _run(capsys, argv)
    assert rc == 2
    assert "3/6 results kept" in err and "rerun the same command to resume" in err
    assert len(rows(next(out.glob("A-*.jsonl")))) == 3
    with FakeServer(backend, port=port) as revived:
        rc, summary, err = _run(capsys, argv)
    assert rc == 0 and summary["equal"] == 6
    assert revived.served == 3  # only the unfinished prompts were sent again
    assert "(resumed)" in err


def test_bench_streams_from_sglang(backend, tmp_path, capsys):
    with FakeServer(backend) as server:
        rc, summary, _ = _run(
            capsys,
            [
                "bench",
                f"sglang+http://127.0.0.1:{server.port}",
                "--lengths",
                "12,40",
                "--new-tokens",
                "5",
                "--vocab-size",
                "384",
                "--warmup",
                "0",
                "--json",
            ],
        )
    assert rc == 0
    assert [(r["prompt_tokens"], r["new_tokens"]) for r in summary["rows"]] == [(12, 5), (40, 5)]
    assert server.requests[0]["body"]["stream"] is True


def test_bench_streams_from_openai_compatible(backend, capsys):
    with FakeServer(backend, flavor="vllm") as server:
        engine = f"openai+http://127.0.0.1:{server.port}/v1?model=tiny"
        rc, summary, _ = _run(
            capsys,
            [
                "bench",
                engine,
                "--lengths",
                "20",
                "--new-tokens",
                "4",
                "--vocab-size",
                "384",
                "--warmup",
                "0",
                "--json",
            ],
        )
    assert rc == 0
    assert [(r["prompt_tokens"], r["new_tokens"]) for r in summary["rows"]] == [(20, 4)]
    assert server.requests[0]["body"]["stream_options"] == {"include_usage": True}


def test_sglang_identity_falls_back_only_on_an_http_status(tmp_path):
    """/server_info answering 404 (older SGLang) falls back to /get_server_info; a server that does not
    answer at all fails naming /server_info, without a second round of retries on the old name."""
    import http.server
    import socket
    import threading

    from bitexact.engines.sglang_http import SGLangHttpEngine
    from bitexact.engines.spec import parse_engine
    from bitexact.errors import EngineError

    seen: list[str] = []

    class OldServer(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            body = json.dumps({"version": "0.4.0"}).encode()
            self.send_response(200 if self.path == "/get_server_info" else 404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), OldServer) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        engine = SGLangHttpEngine(parse_engine(f"sglang+http://127.0.0.1:{server.server_address[1]}"))
        assert engine.identity()["version"] == "0.4.0"
        server.shutdown()
    assert seen[:2] == ["/server_info", "/get_server_info"]

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dead = SGLangHttpEngine(parse_engine(f"sglang+http://127.0.0.1:{port}?retries=1"))
    dead.client.backoff = 0.0
    with pytest.raises(EngineError, match=r"/server_info failed 2 times") as err:
        dead.identity()
    assert "get_server_info" not in str(err.value)
