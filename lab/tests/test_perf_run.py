"""The perf lab's measuring, packing and reporting (lab/perf/run.py and the modules it drives): the
stages drive SGLang's profiling endpoints (stages.py), `bitexact bench` runs against an SGLang-shaped
server, `measure` skips what exists and stops before running out of time (measure.py), the results are
packed within the device tool's limits (pack.py) and the tables are built from them (summary.py). The
servers themselves are test_perf_servers.py's. No SGLang server can run here (no GPU): the profiling flow
runs against a stand-in written from SGLang 0.5.20's `srt/entrypoints/http_server.py` (`/generate`
streaming `data: {...}` lines ending `data: [DONE]`, `/start_profile`, `/stop_profile`, `/abort_request`)
and `srt/managers/scheduler_components/profiler_manager.py` (with `num_steps` the profiler stops itself
after that many forward steps and writes `<prefix>-<profile_id>-TP-0.trace.json.gz` into `output_dir`)."""

from __future__ import annotations

import argparse
import ast
import gzip
import json
import tarfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from checkhelpers import perf_traces

from lab.perf import (
    breakdown,
    lab_servers,
    pack,
    perf_servers,
    prefill,
    results_layout,
    run,
    run_errors,
    stages,
    summary,
)

REPO = Path(__file__).resolve().parents[2]


class StandIn:
    """SGLang's streaming /generate and profiling endpoints, in their 0.5.20 shapes (module docstring)."""

    def __init__(self, trace: dict[str, Any], step_s: float = 0.01) -> None:
        self.trace, self.step_s = trace, step_s
        self.calls: list[tuple[str, Any]] = []
        self.aborted = threading.Event()
        self.profile: dict[str, Any] | None = None
        self.steps = 0
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                stand_in.calls.append((self.path, body))
                if self.path == "/generate" and not body.get("stream"):
                    # a whole request at once (the prefill profile): one token, as SGLang answers
                    return self._text(json.dumps({"text": "", "output_ids": [7], "meta_info": {}}))
                if self.path == "/generate":
                    stand_in.aborted.clear()  # abort_all ends the requests running then, not later ones
                    return self._stream(body)
                if self.path == "/start_profile":
                    stand_in.profile = dict(body, started_at=stand_in.steps)
                    return self._text("Start profiling.\n")
                if self.path == "/stop_profile":
                    stand_in.write_trace()
                    return self._text("Stop profiling. This will take some time.\n")
                if self.path == "/abort_request":
                    stand_in.aborted.set()
                    return self._text("")
                self.send_error(404)

            def _text(self, text: str) -> None:
                data = text.encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, body: dict[str, Any]) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                out: list[int] = []
                for _ in range(body["sampling_params"]["max_new_tokens"]):
                    if stand_in.aborted.is_set():
                        break
                    time.sleep(stand_in.step_s)
                    stand_in.step()
                    out.append(7)
                    chunk = {"text": "", "output_ids": out, "meta_info": {"completion_tokens": len(out)}}
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.flush()
                self.wfile.write(b"data: [DONE]\n\n")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def step(self) -> None:
        self.steps += 1
        p = self.profile
        if p and not p.get("written") and self.steps >= p["started_at"] + int(p["num_steps"]) + 1:
            self.write_trace()

    def write_trace(self) -> None:
        p = self.profile
        if not p or p.get("written"):
            return
        p["written"] = True
        path = Path(p["output_dir"]) / f"{p['profile_prefix']}-{p['profile_id']}-TP-0.trace.json.gz"
        with gzip.open(path, "wt") as f:
            json.dump(self.trace, f)

    def close(self) -> None:
        self.server.shutdown()


@pytest.fixture()
def spec_trace(tmp_path: Path) -> dict[str, Any]:
    kinds = [k for k, _ in perf_traces.SPEC_ITERATION if k]
    return perf_traces.add_gpu(
        perf_traces.cpu_trace(tmp_path / "cpu.json", 4, kinds), perf_traces.SPEC_ITERATION
    )


def _args(tmp_path: Path, **extra: Any) -> argparse.Namespace:
    values = dict(
        work=tmp_path,
        results=tmp_path / "results",
        profile_prompt=300,
        profile_steps=3,
        out=None,
        server=["exact-spec"],
        runs=1,
    )
    values.update(extra)
    return argparse.Namespace(**values)


def test_profile_drives_sglangs_endpoints(tmp_path: Path, spec_trace: dict[str, Any]) -> None:
    stand_in = StandIn(spec_trace)
    try:
        out = tmp_path / "results" / "exact-spec"
        trace = stages.profile(perf_servers.SERVERS["exact-spec"], _args(tmp_path), out, stand_in.port, 300)
    finally:
        stand_in.close()
    assert trace.name == "perf-exact-spec-TP-0.trace.json.gz"
    assert trace.parent == (out / "profile-300").resolve()
    paths = [path for path, _ in stand_in.calls]
    assert paths[0] == "/generate" and paths[-1] == "/abort_request" and "/stop_profile" not in paths
    start = dict(stand_in.calls)["/start_profile"]
    assert start["activities"] == ["CPU", "GPU"] and start["num_steps"] == 3
    assert start["with_stack"] is False and start["record_shapes"] is False
    assert len(dict(stand_in.calls)["/generate"]["input_ids"]) == 300
    assert stand_in.profile and stand_in.profile["started_at"] >= 8  # after decode is under way
    assert breakdown.analyse(breakdown.load_events(trace))["cycles"] == 3


def test_profile_stops_the_profiler_when_the_request_ends_first(
    tmp_path: Path, spec_trace: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    stand_in = StandIn(spec_trace)
    monkeypatch.setattr(stages, "PROFILE_TOKENS", 12)  # the request ends before the 50 profiled steps
    monkeypatch.setattr(stages, "PROFILE_WAIT_S", 3.0)
    try:
        trace = stages.profile(
            perf_servers.SERVERS["exact-spec"],
            _args(tmp_path, profile_steps=50),
            tmp_path / "r" / "x",
            stand_in.port,
            300,
        )
    finally:
        stand_in.close()
    assert "/stop_profile" in [path for path, _ in stand_in.calls] and trace.exists()


def test_prefill_profile_records_one_whole_request_with_shapes(tmp_path: Path) -> None:
    trace = perf_traces.add_prefill_gpu(
        perf_traces.prefill_cpu_trace(tmp_path / "p.json", 2), "_exact_gemm_kernel", 1.0
    )
    stand_in = StandIn(trace)
    try:
        out = tmp_path / "results" / "exact-no-spec"
        found = stages.prefill_profile(
            perf_servers.SERVERS["exact-no-spec"], _args(tmp_path, prefill_prompt=500), out, stand_in.port
        )
    finally:
        stand_in.close()
    assert found.parent == (out / "prefill").resolve()
    assert [path for path, _ in stand_in.calls] == ["/start_profile", "/generate", "/stop_profile"]
    start = dict(stand_in.calls)["/start_profile"]
    assert start["record_shapes"] is True and "num_steps" not in start  # the whole request, stopped by us
    assert start["activities"] == ["CPU", "GPU"] and start["profile_prefix"] == "prefill"
    generate = dict(stand_in.calls)["/generate"]
    assert len(generate["input_ids"]) == 500 and generate["sampling_params"]["max_new_tokens"] == 1
    assert not generate.get("stream")
    assert prefill.analyse(breakdown.load_events(found))["steps"] == {"EXTEND": 2}


def _results(tmp_path: Path, spec_trace: dict[str, Any]) -> Path:
    from lab.perf.breakdown import analyse

    results = tmp_path / "results"
    stock_iteration = [
        (
            k,
            [
                ("nvjet_tst_128x24_64x11_2x1_v_bz_TNT" if n == "matmul_kernel_persistent" else n, d / 4)
                for n, d in ks
            ],
        )
        for k, ks in perf_traces.SPEC_ITERATION
    ]
    kinds = [k for k, _ in perf_traces.SPEC_ITERATION if k]
    stock_trace = perf_traces.add_gpu(perf_traces.cpu_trace(tmp_path / "c2.json", 4, kinds), stock_iteration)
    prefills = {
        "exact-spec": perf_traces.add_prefill_gpu(
            perf_traces.prefill_cpu_trace(tmp_path / "p1.json", 2), "_exact_gemm_kernel", 2.2
        ),
        "stock-spec": perf_traces.add_prefill_gpu(
            perf_traces.prefill_cpu_trace(tmp_path / "p2.json", 2), "nvjet_tst_128x24_64x11_2x1_v_bz_TNT", 2.0
        ),
    }
    for name, trace in (("exact-spec", spec_trace), ("stock-spec", stock_trace)):
        folder = results / name
        (folder / "profile").mkdir(parents=True)
        with gzip.open(folder / "profile" / f"perf-{name}-TP-0.trace.json.gz", "wt") as f:
            json.dump(trace, f)
        (folder / "prefill").mkdir()
        with gzip.open(folder / "prefill" / f"prefill-{name}-prefill-TP-0.trace.json.gz", "wt") as f:
            json.dump(prefills[name], f)
        found = prefill.analyse(prefills[name]["traceEvents"], source=name)
        (folder / "prefill.json").write_text(json.dumps(found))
        long = {"prompt_tokens": 131072, "new_tokens": 128, "runs": 1, "ttft_s": 9.0, "decode_tps": 20.0}
        (folder / "bench-long.json").write_text(json.dumps({"verb": "bench", "rows": [long]}))
        (folder / "breakdown.json").write_text(json.dumps(analyse(trace["traceEvents"], source=name)))
        rows = [
            {"prompt_tokens": n, "new_tokens": 128, "runs": 1, "ttft_s": 0.1 * i, "decode_tps": 50.0 - i}
            for i, n in enumerate((640, 2200, 32768))
        ]
        (folder / "bench.json").write_text(json.dumps({"verb": "bench", "rows": rows}))
        meta = {"spec_accept_length": 5.0, "spec_verify_ct": 26, "completion_tokens": 128}
        (folder / "meta.json").write_text(
            json.dumps(perf_servers.check_meta(perf_servers.SERVERS[name], meta))
        )
        (folder / "run.json").write_text(json.dumps({"server": name, "ready_s": 100.0}))
        (folder / "server.log").write_text("log\n")
    return results


def test_bench_runs_bitexact_against_an_sglang_shaped_server(tmp_path: Path) -> None:
    """The bench stage's command line, run for real by bitexact against bitexact's own SGLang stand-in
    (checkhelpers/bx_fake_servers.py, a tiny transformers model behind SGLang's HTTP shapes)."""
    from checkhelpers.bx_fake_servers import Backend, FakeServer
    from checkhelpers.bx_tiny_models import make_model

    model = make_model(tmp_path / "tiny", layers=1, hidden=32, seed=0)
    args = _args(tmp_path, lengths="40,60", new_tokens=4, warmup=0, tokenizer="bytes", runs=3)
    out = tmp_path / "results" / "stock-spec"
    out.mkdir(parents=True)
    with FakeServer(Backend(model)) as server:
        found = stages.bench(
            perf_servers.SERVERS["stock-spec"],
            args,
            out,
            server.port,
            remaining=120,
            plan=("bench", "40,60", 0),
        )
    assert [r["prompt_tokens"] for r in found["rows"]] == [40, 60]
    assert all(r["new_tokens"] == 4 and r["decode_tps"] > 0 for r in found["rows"])
    assert all(r["runs"] == 3 for r in found["rows"])  # medians of --runs timed runs
    assert list((out / "bench").glob("bench-*.jsonl"))  # bitexact's resumable timings


def test_pack_stays_within_the_device_tools_limits(tmp_path: Path, spec_trace: dict[str, Any]) -> None:
    results = _results(tmp_path, spec_trace)
    out = tmp_path / "OUT"
    written = pack.pack(results, out, list(perf_servers.SERVERS))
    assert sorted(p.name for p in written) == [
        "perf-exact-spec.tar.gz",
        "perf-exact-spec.txt",
        "perf-stock-spec.tar.gz",
        "perf-stock-spec.txt",
    ]
    assert all(p.parent == out for p in written) and len(written) <= 8  # four servers: 8 files
    with tarfile.open(out / "perf-exact-spec.tar.gz") as tar:
        names = tar.getnames()
    assert "exact-spec/bench.json" in names and "exact-spec/prefill.json" in names
    assert "exact-spec/profile/perf-exact-spec-TP-0.trace.json.gz" in names
    assert "exact-spec/prefill/prefill-exact-spec-prefill-TP-0.trace.json.gz" in names
    text = (out / "perf-exact-spec.txt").read_text()
    assert "accept length 5.00 over 26 verify steps" in text and "131072 tokens: 20.00 t/s" in text
    limit = pack.MAX_FILE_BYTES
    try:
        pack.MAX_FILE_BYTES = 10  # over the limit: packed again without the traces
        pack.pack(results, tmp_path / "OUT2", ["exact-spec"])
        with tarfile.open(tmp_path / "OUT2" / "perf-exact-spec.tar.gz") as tar:
            names = tar.getnames()
        assert "exact-spec/prefill.json" in names and not [n for n in names if n.endswith(".trace.json.gz")]
    finally:
        pack.MAX_FILE_BYTES = limit


def test_summarize_builds_the_tables_and_the_labelled_estimate(
    tmp_path: Path, spec_trace: dict[str, Any]
) -> None:
    results = _results(tmp_path, spec_trace)
    long = {
        "rows": [{"prompt_tokens": 131072, "new_tokens": 128, "runs": 1, "ttft_s": 9.0, "decode_tps": 20.0}]
    }
    (results / "stock-spec" / "bench-long.json").unlink()
    (results / "exact-spec" / "bench-long.json").unlink()
    (results / "exact-spec" / "bench-128k.json").write_text(json.dumps(long))
    text = summary.summarize(results)
    assert "| 131072 | 20.0 | 9.00 | - | - |" in text
    assert "| 2200 | 1.00 | 1.00 |" in text and "| 131072 | - | - |" in text  # the ratio table
    assert "### exact-spec against stock-spec" in text
    assert "| N=48 K=32 | 0.2 | 0.2 | 1.10 |" in text and "| **gemm** | 0.4 | 0.3 | 1.10 |" in text
    assert "| 640 | 50.0 | 0.00 | 50.0 | 0.00 |" in text
    assert "| 32768 | 48.0 | 0.20 | 48.0 | 0.20 |" in text
    assert "Tokens per cycle: 5 (simulated accept length)" in text
    assert "accept length 5.00 over 26 verify steps of 128 tokens (stated 5;" in text
    assert "| exact-spec | 5 | 102.0 |" in text  # 5 tokens at 49 t/s, the 2200-token bench row
    assert text.count("**A model, not a measurement**") == 2  # small-M route assumed, and H200 GEMMs kept
    assert "| gemm | 430.0 | 107.5 | 4.00 | bandwidth |" in text
    with pytest.raises(run_errors.RunError, match="no server folders"):
        summary.summarize(tmp_path / "empty")


def _assembled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The folders check_ready looks for (trees, deps, model configs), empty: a host after assembly."""
    for tree in ("patched/sglang", "stock/sglang", "deps"):
        (tmp_path / tree).mkdir(parents=True)
    (tmp_path / "deps" / ".complete").write_text("")
    models = tmp_path / "models"
    for sub in ("target", "drafter"):
        (models / sub).mkdir(parents=True)
        (models / sub / "config.json").write_text("{}")
    monkeypatch.setattr(perf_servers, "model_dirs", lambda: (models / "target", models / "drafter"))


def test_measure_skips_finished_servers_and_stops_before_running_out_of_time(
    tmp_path: Path, spec_trace: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    results = _results(tmp_path, spec_trace)
    _assembled(tmp_path, monkeypatch)
    started: list[str] = []
    monkeypatch.setattr(lab_servers, "Server", lambda *a, **k: started.append(a[2]))
    base = ["measure", "--work", str(tmp_path), "--results", str(results), "--server", "exact-spec"]
    assert run.main([*base, "--deadline-s", "100"]) == run_errors.OUT_OF_TIME  # the default lengths owe the
    assert started == []  # 32768- and 131072-token profiles, and 100 s is too little to start a server
    argv = [*base, "--profile-prompt", "2200"]
    assert run.main(argv) == 0 and started == []  # finished (its legacy breakdown.json is the 2200 one)
    (results / "exact-spec" / "prefill.json").unlink()
    assert run.main([*argv, "--deadline-s", "100"]) == run_errors.OUT_OF_TIME  # the prefill profile is owed
    assert run.main([*argv, "--prefill-prompt", "0"]) == 0 and started == []
    tagged = [*argv, "--bench-tag", "128k", "--lengths", "131072", "--no-profile", "--deadline-s", "100"]
    assert (
        run.main(tagged) == run_errors.OUT_OF_TIME
    )  # a further bench is new work (and here too little time)
    argv[argv.index("exact-spec")] = "exact-no-spec"
    assert run.main([*argv, "--deadline-s", "100"]) == run_errors.OUT_OF_TIME and started == []


def _function(source: str, name: str) -> str:
    tree = ast.parse(source)
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name)
    return ast.get_source_segment(source, node) or ""


@pytest.mark.network  # the released wheel, downloaded on first use
def test_the_sglang_facts_the_runner_relies_on() -> None:
    """Read in the released sglang 0.5.20 wheel: what the runner sends and what it expects back."""
    from checkhelpers.released_wheels import unpacked_wheel

    srt = unpacked_wheel("sglang", "0.5.20") / "sglang" / "srt"
    # SGLANG_SIMULATE_ACC_LEN: a float, off below 0; match-expected gives an integer length exactly.
    assert "SGLANG_SIMULATE_ACC_LEN = EnvFloat(-1)" in (srt / "environ.py").read_text()
    spec_utils = (srt / "speculative" / "spec_utils.py").read_text()
    space: dict[str, Any] = {"torch": __import__("torch")}
    exec(_function(spec_utils, "sample_simulated_acc_len"), space)
    assert {space["sample_simulated_acc_len"](5.0, "match-expected", 8) for _ in range(50)} == {5}
    worker = (srt / "speculative" / "dflash_worker_v2.py").read_text()
    assert "if SIMULATE_ACC_LEN > 0:" in worker and "apply_dflash_simulated_acceptance(" in worker
    # The drafter's context layers for 64 target layers and 5 draft layers.
    utils = (srt / "speculative" / "dflash_utils.py").read_text()
    space = {"List": list}
    exec(_function(utils, "build_target_layer_ids"), space)
    assert space["build_target_layer_ids"](64, 5) == [1, 16, 31, 46, 61]
    # Step spans, profiling request fields, trace file name, endpoints.
    profile_utils = (srt / "utils" / "profile_utils.py").read_text()
    assert 'stage = "VERIFY"' in profile_utils and 'stage = "DRAFT"' in profile_utils
    assert 'base = f"step[{stage} bs={bs}"' in profile_utils
    io_struct = (srt / "managers" / "io_struct.py").read_text()
    fields = io_struct[io_struct.index("class ProfileReq(") :][:1500]
    for field in (
        "output_dir",
        "num_steps",
        "activities",
        "with_stack",
        "record_shapes",
        "profile_id",
        "profile_prefix",
    ):
        assert f"    {field}: " in fields, field
    manager = (srt / "managers" / "scheduler_components" / "profiler_manager.py").read_text()
    assert (
        '+ ".trace.json.gz"' in manager
        and 'filename_parts = [self.profile_id, f"TP-{self.ps.tp_rank}"]' in manager
    )
    server = (srt / "entrypoints" / "http_server.py").read_text()
    for route in ('"/start_profile"', '"/stop_profile"', '"/abort_request"', '"/health_generate"'):
        assert route in server, route


def test_measure_runs_an_owed_prefill_stage_end_to_end(
    tmp_path: Path, spec_trace: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`measure` with only the prefill profile owed: the server (a stand-in for lab_servers.Server) starts,
    meta_info is checked, the profiler stand-in answers /start_profile, /generate, /stop_profile, and
    prefill.json, prefill.md and the stage's seconds in run.json are written."""
    results = _results(tmp_path, spec_trace)
    (results / "exact-spec" / "prefill.json").unlink()
    _assembled(tmp_path, monkeypatch)

    class Server:
        restarts: list[str] = []

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.stopped = False

        def wait_ready(self, timeout_s: float) -> float:
            return 1.0

        def stop(self) -> None:
            self.stopped = True

    monkeypatch.setattr(lab_servers, "Server", Server)
    meta = {"spec_accept_length": 5.0, "spec_verify_ct": 26, "completion_tokens": 128}
    monkeypatch.setattr(lab_servers, "meta_sample", lambda *a, **k: meta)
    trace = perf_traces.add_prefill_gpu(
        perf_traces.prefill_cpu_trace(tmp_path / "p.json", 2), "_exact_gemm_kernel", 1.0
    )
    stand_in = StandIn(trace)
    try:
        argv = ["measure", "--work", str(tmp_path), "--results", str(results), "--server", "exact-spec"]
        argv += ["--profile-prompt", "2200"]
        assert run.main([*argv, "--port", str(stand_in.port), "--prefill-prompt", "64"]) == 0
    finally:
        stand_in.close()
    folder = results / "exact-spec"
    assert json.loads((folder / "prefill.json").read_text())["steps"] == {"EXTEND": 2}
    assert "prefill of 64 tokens" in (folder / "prefill.md").read_text()
    assert "prefill_profile_s" in json.loads((folder / "run.json").read_text())
    assert [path for path, _ in stand_in.calls] == ["/start_profile", "/generate", "/stop_profile"]


def test_profiles_at_every_length_are_measured_and_named_by_length(
    tmp_path: Path, spec_trace: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the legacy 2200-token profile in place, `measure` owes the other lengths: each is profiled
    through the stand-in's endpoints into breakdown-<L>.json and profile-<L>/, and summarize reports every
    length (the per-cycle table across contexts included)."""
    results = _results(tmp_path, spec_trace)
    _assembled(tmp_path, monkeypatch)

    class Server:
        restarts: list[str] = []

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pass

        def wait_ready(self, timeout_s: float) -> float:
            return 1.0

        def stop(self) -> None:
            pass

    monkeypatch.setattr(lab_servers, "Server", Server)
    meta = {"spec_accept_length": 5.0, "spec_verify_ct": 26, "completion_tokens": 128}
    monkeypatch.setattr(lab_servers, "meta_sample", lambda *a, **k: meta)
    stand_in = StandIn(spec_trace)
    try:
        argv = ["measure", "--work", str(tmp_path), "--results", str(results), "--server", "exact-spec"]
        argv += ["--profile-prompt", "2200,300,400", "--port", str(stand_in.port), "--profile-steps", "3"]
        assert run.main(argv) == 0
    finally:
        stand_in.close()
    folder = results / "exact-spec"
    assert sorted(results_layout.breakdown_files(folder)) == [300, 400, 2200]
    assert (folder / "profile-300").is_dir() and (folder / "breakdown-400.md").exists()
    generated = [body for path, body in stand_in.calls if path == "/generate"]
    assert [len(body["input_ids"]) for body in generated] == [300, 400]  # 2200 was there already
    text = summary.summarize(results)
    assert "## Where the GPU time goes, per cycle, at 300 tokens of context" in text
    assert "| exact-spec | 400 |" in text and "| exact-spec | 2200 |" in text


def test_profile_lengths_are_checked() -> None:
    assert run.profile_lengths("2200,131072") == [2200, 131072]
    for bad in ("", "2200,", "x", "0", "-5,100"):
        with pytest.raises(argparse.ArgumentTypeError):
            run.profile_lengths(bad)
