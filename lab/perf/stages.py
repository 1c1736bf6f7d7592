"""The measuring stages against one running server, each one call: the bench (`bitexact bench` at a list of
prompt lengths, single stream: decode t/s and time to first token), the decode profile (SGLang's
/start_profile for a few forward steps in the middle of a streaming request at one context length), the
prefill profile (one whole request, with the ops' shapes) and the analysis of a recorded trace."""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lab.perf import breakdown, lab_servers, perf_servers
from lab.perf.perf_servers import ServerSpec, served_recipe
from lab.perf.run_errors import OutOfTime, RunError, log
from lab.perf.sglang_http import Stream, post

REPO = Path(__file__).resolve().parents[2]
PROFILE_TOKENS = 2048  # the profiled request's budget: it is aborted once the trace is written
PROFILE_WAIT_S = 120.0  # for the trace after /start_profile, and again after /stop_profile


def bench_name(args: argparse.Namespace) -> str:
    tag = getattr(args, "bench_tag", "")
    return f"bench-{tag}" if tag else "bench"


def benches(args: argparse.Namespace) -> list[tuple[str, str, int]]:
    """(name, lengths, warm-ups) of each bench this call runs: the main one, then the long one."""
    plan = [(bench_name(args), args.lengths, args.warmup)]
    if not getattr(args, "bench_tag", "") and getattr(args, "long_lengths", ""):
        plan.append(("bench-long", args.long_lengths, args.long_warmup))
    return plan


def bench(
    spec: ServerSpec,
    args: argparse.Namespace,
    out: Path,
    port: int,
    remaining: float,
    plan: tuple[str, str, int],
) -> dict[str, Any]:
    name, lengths, warmup = plan
    tokenizer = args.tokenizer or str(perf_servers.model_dirs()[0])
    command = [
        sys.executable,
        "-m",
        "bitexact",
        "bench",
        f"sglang+http://127.0.0.1:{port}",
        "--lengths",
        lengths,
        "--tokenizer",
        tokenizer,
        "--new-tokens",
        str(args.new_tokens),
        "--warmup",
        str(warmup),
        "--runs",
        str(args.runs),
        "--out",
        str(out / name),
        "--json",
    ]
    with (out / f"{name}.log").open("a") as stderr:
        stderr.write("+ " + " ".join(command) + "\n")
        stderr.flush()
        try:
            done = subprocess.run(
                command,
                cwd=REPO,
                env=lab_servers.base_env(args.work, spec.tree, served_recipe(args)),
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                timeout=max(remaining, 1),
            )
        except subprocess.TimeoutExpired:
            raise OutOfTime("bench ran out of this call's time; its finished lengths are kept") from None
    if done.returncode != 0:
        raise RunError(f"bitexact bench exited {done.returncode}; see {out / name}.log")
    return json.loads(done.stdout)


def profile(spec: ServerSpec, args: argparse.Namespace, out: Path, port: int, length: int) -> Path:
    """A trace of --profile-steps forward steps in the middle of a long single-stream decode."""
    folder = (out / f"profile-{length}").resolve()
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(20261130)
    ids = [rng.randrange(3, 3012) for _ in range(length)]  # byte and letter-pair tokens
    stream = Stream(port, ids, PROFILE_TOKENS)
    stream.start()
    started = time.monotonic()
    # the first chunk waits for the whole prefill (about 55 s at 131072 tokens on the H200)
    while stream.chunks < 8:
        if not stream.is_alive() or time.monotonic() - started > 180 + length / 1000:
            raise RunError(f"the profiled request did not stream 8 chunks ({stream.error or 'timeout'})")
        time.sleep(0.2)
    body = {
        "output_dir": str(folder),
        "num_steps": args.profile_steps,
        "activities": ["CPU", "GPU"],
        "with_stack": False,
        "record_shapes": False,
        "profile_id": spec.name,
        "profile_prefix": "perf",
    }
    post(port, "/start_profile", body)
    trace = _wait_for_trace(folder, PROFILE_WAIT_S)
    if trace is None:
        log(f"no trace after {PROFILE_WAIT_S:.0f} s: asking the server to stop profiling")
        post(port, "/stop_profile", None, timeout=300)
        trace = _wait_for_trace(folder, PROFILE_WAIT_S)
    post(port, "/abort_request", {"abort_all": True})
    stream.join(timeout=60)
    if trace is None:
        raise RunError(f"the profiler wrote no *.trace.json.gz under {folder}; see the server log")
    return trace


def prefill_profile(spec: ServerSpec, args: argparse.Namespace, out: Path, port: int) -> Path:
    """A trace of one whole prefill of --prefill-prompt tokens, with the ops' input shapes."""
    folder = (out / "prefill").resolve()
    folder.mkdir(parents=True, exist_ok=True)
    # Another seed than the decode profile's: a shared first 2200 tokens could be served from the cache.
    rng = random.Random(20261201)
    ids = [rng.randrange(3, 3012) for _ in range(args.prefill_prompt)]
    body = {
        "output_dir": str(folder),
        "activities": ["CPU", "GPU"],
        "with_stack": False,
        "record_shapes": True,
        "profile_id": f"{spec.name}-prefill",
        "profile_prefix": "prefill",
    }
    post(port, "/start_profile", body)
    try:
        post(
            port,
            "/generate",
            {"input_ids": ids, "sampling_params": {"temperature": 0.0, "max_new_tokens": 1}},
            timeout=600,
        )
    finally:
        post(port, "/stop_profile", None, timeout=300)
    trace = _wait_for_trace(folder, PROFILE_WAIT_S)
    if trace is None:
        raise RunError(f"the profiler wrote no *.trace.json.gz under {folder}; see the server log")
    return trace


def _wait_for_trace(folder: Path, timeout: float) -> Path | None:
    started, last = time.monotonic(), -1
    while time.monotonic() - started < timeout:
        found = sorted(folder.glob("*.trace.json.gz"))
        if found:
            size = found[0].stat().st_size
            if size == last and size > 0:
                return found[0]
            last = size
        time.sleep(1)
    return None


def traced_stage(
    spec: ServerSpec,
    out: Path,
    deadline: float,
    target: str,
    record: Callable[[], Path],
    analyse: Callable[..., dict[str, Any]],
) -> dict[str, Any]:
    """Record a trace, analyse it and write the result to `target`; the returned result carries the
    stage's seconds under `_stage_s` for run.json."""
    if deadline - time.monotonic() < 90:
        raise OutOfTime(f"{spec.name}: not enough time left for the trace behind {target}")
    began = time.monotonic()
    trace = record()
    try:
        result = analyse(breakdown.load_events(trace), source=trace.name)
    except breakdown.TraceError as error:
        raise RunError(f"{spec.name}: {error}") from None
    (out / target).write_text(json.dumps(result, indent=1) + "\n")
    return {**result, "_stage_s": round(time.monotonic() - began, 1)}
