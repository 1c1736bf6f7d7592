"""Bad values are usage errors (exit 2, naming the option), never silently something else; a run without
--json still says its verdict on stdout; bench keeps what it measured."""

from __future__ import annotations

import json

import pytest
from bitexact.cli import main
from bitexact.engines.spec import parse_engine
from bitexact.errors import UsageError
from checkhelpers.bx_cli import rows
from checkhelpers.bx_fake_servers import Backend, FakeServer
from checkhelpers.bx_tiny_models import make_model

ENGINE = "sglang+http://127.0.0.1:9"  # never contacted: every case fails before


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["parity", ENGINE, ENGINE, "--limit", "0"], "--limit: must be 1 or more, not 0"),
        (["parity", ENGINE, ENGINE, "--limit", "-1"], "--limit: must be 1 or more, not -1"),
        (["parity", ENGINE, ENGINE, "--inflight-a", "0"], "--inflight-a: must be 1 or more, not 0"),
        (["parity", ENGINE, ENGINE, "--inflight-b", "x"], "--inflight-b: 'x' is not a whole number"),
        (["parity", ENGINE, ENGINE, "--max-new-tokens", "0"], "--max-new-tokens: must be 1 or more"),
        (["parity", ENGINE, ENGINE, "--top-logprobs", "1"], "--top-logprobs: must be 2 or more"),
        (["repeat", ENGINE, "--repeats", "1"], "--repeats/-n: must be 2 or more"),
        (["repeat", ENGINE, "--batch", "0"], "--batch/-b: must be 1 or more"),
        (["bench", ENGINE, "--runs", "0"], "--runs: must be 1 or more"),
        (["bench", ENGINE, "--warmup", "-1"], "--warmup: must be 0 or more"),
        (["bench", ENGINE, "--new-tokens", "1"], "--new-tokens: must be 2 or more"),
        (["parity", ENGINE, ENGINE, "--limit", "3", "--limit", "5"], "--limit given more than once"),
    ],
)
def test_bad_counts_are_usage_errors(argv, said, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert said in capsys.readouterr().err


def test_an_engine_without_a_port_is_refused():
    for raw in ("sglang+http://127.0.0.1", "openai+http://h/v1?model=m", "sglang+https://h"):
        with pytest.raises(UsageError, match="no port; give it explicitly"):
            parse_engine(raw)
    assert parse_engine("sglang+https://h:443").target == "https://h:443"
    assert main(["parity", "sglang+http://127.0.0.1", ENGINE]) == 2


def test_lengths_must_be_positive(capsys):
    assert main(["bench", ENGINE, "--lengths", "16,0", "--vocab-size", "100"]) == 2
    assert "every length must be 1 token or more" in capsys.readouterr().err


@pytest.fixture(scope="module")
def backend(tmp_path_factory) -> Backend:
    return Backend(make_model(tmp_path_factory.mktemp("v") / "target", layers=2, hidden=64, seed=0))


def test_verdict_on_stdout_without_json(backend, prompt_file, tmp_path, capsys):
    with FakeServer(backend) as server:
        a = f"sglang+http://127.0.0.1:{server.port}"
        argv = ["--prompts", str(prompt_file), "--limit", "2", "--max-new-tokens", "3"]
        assert main(["parity", a, a, "--out", str(tmp_path / "p"), *argv]) == 2  # the same engine twice
        assert "A and B are the same engine" in capsys.readouterr().err
        assert main(["parity", a, a, "--allow-same-engine", "--out", str(tmp_path / "p"), *argv]) == 0
        out = capsys.readouterr().out
        assert out.count("\n") == 1
        assert out.startswith(
            "parity: EQUAL (the same engine on both sides: a repeat check, not parity): 2/2 prompts equal "
            "(0 differ in token ids); compared: every token id, logprob and top-5 alternative (id and "
            "logprob) at 6 positions of 2 prompts; report: "
        )
        assert out.rstrip().endswith("parity.html")
        # one server asked two ways (the GPU battery gpu-parity-inflight-8) is a batching check: allowed
        batching = ["parity", a, a, "--inflight-a", "2", "--inflight-b", "1", "--out", str(tmp_path / "b")]
        assert main([*batching, *argv]) == 0
        assert capsys.readouterr().out.startswith(
            "parity: EQUAL (the same engine on both sides, 2 against 1 in flight: a batching check): 2/2"
        )
        assert main(["repeat", a, "-n", "2", "-b", "1", "--out", str(tmp_path / "r"), *argv]) == 0
        out = capsys.readouterr().out
        assert out.startswith(
            "repeat: REPEATABLE: 0/2 repeats differ from the first (0 in token ids, the rest in logprobs or "
            "top-k only); compared: every token id, logprob and top-5 alternative (id and logprob) at 6 "
            "positions of 2 repeats; report: "
        )


def test_bench_stores_timings_writes_reports_and_resumes(backend, tmp_path, capsys):
    out = tmp_path / "o"
    with FakeServer(backend) as server:
        argv = ["bench", f"sglang+http://127.0.0.1:{server.port}", "--lengths", "12,40", "--new-tokens", "4"]
        argv += ["--vocab-size", "384", "--warmup", "1", "--runs", "2", "--out", str(out)]
        assert main(argv) == 0
        first = capsys.readouterr()
        assert first.out.startswith("bench: finished: 12 tokens ") and first.out.count("\n") == 1
        assert server.served == 2 * (1 + 2)  # per length: a warm-up and two timed runs
        (results,) = out.glob("bench-*.jsonl")
        stored = rows(results)
        assert sorted(r["id"] for r in stored) == [
            "long-12-s0#run0",
            "long-12-s0#run1",
            "long-40-s1#run0",
            "long-40-s1#run1",
        ]
        assert all(r["timing"]["prompt_tokens"] in (12, 40) for r in stored)
        for report in ("bench.md", "bench.html"):
            assert (
                "| 12 | 4 | 2 |" in (out / report).read_text() or "<td>12</td>" in (out / report).read_text()
            )
        assert main([*argv, "--json"]) == 0
        summary = json.loads(capsys.readouterr().out)
    assert server.served == 6  # every timed run was stored: nothing measured again, no warm-up either
    assert [(r["prompt_tokens"], r["runs"]) for r in summary["rows"]] == [(12, 2), (40, 2)]
