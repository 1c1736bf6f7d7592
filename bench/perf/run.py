"""What exactness costs end to end (issues 11, 18): four SGLang servers of the 27B-shaped model on one GPU.

Servers (SERVERS; variants of nix/recipes/perf-27b-shape.json, the recipe's argv with only the model paths
changed and `--load-format dummy` added):
- `exact-spec`: the recipe (speculation on, `--enable-deterministic-inference`), patched tree, through
  the launcher (`perf-exact-spec`: the recipe plus simulated acceptance);
- `stock-spec`: the released tree, the launcher's printed argv without `--enable-deterministic-inference`
  (`perf-stock-spec`), the same simulated acceptance;
- `exact-no-spec`: patched tree, the recipe's `no-spec` variant;
- `stock-no-spec`: the released tree without `--enable-deterministic-inference` and without speculation
  (`perf-stock-no-spec`): the recipe author's reference row.
Beside them, on request (--server): `exact-spec-window` (exact-spec with the drafter's context capped at
4096 tokens), and `exact-spec-radix` / `stock-spec-radix` (exact-spec and stock-spec with the radix cache
on), which run the prefix-reuse stage alone (bench/perf/reuse.py: time to the first token with a shared
prefix of --reuse-prefix tokens from the cache against computed afresh; `reuse.json` + `reuse.jsonl`).
Random weights accept no drafts, so both speculative servers run with SGLang's own
`SGLANG_SIMULATE_ACC_LEN` (srt/speculative/dflash_worker_v2.py calls
dflash_utils.apply_dflash_simulated_acceptance: every verify step commits that many tokens;
`real-draft-token` commits the drafter's tokens and the target's own next one); the length is the
recipe variant's, and the server's meta_info must report it.

Per server, each stage is written as it finishes and skipped on a rerun when its output exists:
1. start (checks/e2e/lab_servers.py's Server; host settings as there) and wait for /health_generate;
2. `meta.json`: one /generate's meta_info, checked (speculation at the stated length, or none);
3. `bench.json` + `bench/`: `bitexact bench` at --lengths (single stream, decode t/s and time to first
   token; its JSONL resumes per length), then `bench-long.json` + `bench-long/` at --long-lengths with
   --long-warmup warm-ups (default 131072 tokens, none: the server has prefilled 32768 by then, and with
   chunked prefill every chunk of a longer prompt has the shapes a 32768 prompt had); `--bench-tag TAG
   --lengths L` adds `bench-TAG.json` later without redoing the rest;
4. `breakdown-<L>.json` + `profile-<L>/` for each L of --profile-prompt (default 2200, 32768, 131072): a
   streaming request at L tokens, SGLang's /start_profile for --profile-steps forward steps (activities
   CPU and GPU, no stacks, no shapes), then bench/perf/breakdown.py on the trace (results of earlier runs
   named `breakdown.json` + `profile/` are read as the 2200-token profile);
5. `prefill.json` + `prefill/`: /start_profile with shapes recorded, one request of --prefill-prompt
   tokens (max_new_tokens 1), /stop_profile, then bench/perf/prefill.py on the trace: the prefill's GPU
   time by component and GEMM by GEMM;
then the server stops and `run.json` records the timings. `--out` packs the results into the device tool's
$OUT after every stage (at most 8 files come back: one tarball with the traces and one text per server).

Usage (repository root, GPU host, after checks/e2e/host.sh stash/build and bench/perf/host.sh model):
    python bench/perf/run.py measure --work WORK --results DIR --server exact-spec --out "$OUT"
    python bench/perf/run.py warm --work WORK --server exact-spec --log FILE [--mem-fraction-static F]
    python bench/perf/run.py pack --results DIR --out "$OUT"
    python bench/perf/run.py summarize DIR [--markdown FILE]      # here too: the tables, from results
Exit status: 0 done, 2 an error (named on stderr), 3 out of time in this call (rerun the same command).
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import subprocess
import sys
import tarfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
import breakdown  # noqa: E402
import lab_servers  # noqa: E402  (the product runner's Server and trees, the lab's host settings)
import prefill  # noqa: E402
import reuse  # noqa: E402
import target_estimate  # noqa: E402

RECIPE = REPO / "nix" / "recipes" / "perf-27b-shape.json"
LENGTHS = "640,2200,32768"
LONG_LENGTHS = "131072"
PREFILL_PROMPT = 32768
NEW_TOKENS = 128
PROFILE_PROMPT = 2200  # the profile length of results written before profiles at every length
PROFILE_PROMPTS = "2200,32768,131072"
PROFILE_STEPS = 6
PROFILE_TOKENS = 2048  # the profiled request's budget: it is aborted once the trace is written
PROFILE_WAIT_S = 120.0  # for the trace after /start_profile, and again after /stop_profile
MAX_FILE_BYTES = 16 * 1024 * 1024 - 4096  # the device tool returns files up to 16 MiB
OUT_OF_TIME = 3


@dataclass(frozen=True)
class ServerSpec:
    name: str
    tree: str
    variant: str
    speculative: bool
    description: str
    reuse: bool = False  # a radix server: only the prefix-reuse stage runs (bench/perf/reuse.py)


SERVERS = {
    s.name: s
    for s in (
        ServerSpec("exact-spec", "patched", "perf-exact-spec", True, "exact, speculation on (the recipe)"),
        ServerSpec("stock-spec", "stock", "perf-stock-spec", True, "stock tree, no deterministic inference"),
        ServerSpec(
            "exact-spec-window",
            "patched",
            "perf-exact-spec-window",
            True,
            "exact, speculation on, the drafter's context capped at 4096 tokens",
        ),
        ServerSpec("exact-no-spec", "patched", "no-spec", False, "exact, speculation off"),
        ServerSpec(
            "stock-no-spec",
            "stock",
            "perf-stock-no-spec",
            False,
            "stock tree, speculation off (the reference row)",
        ),
        ServerSpec(
            "exact-spec-radix",
            "patched",
            "perf-exact-spec-radix",
            True,
            "exact, speculation on, the radix cache on",
            reuse=True,
        ),
        ServerSpec(
            "stock-spec-radix",
            "stock",
            "perf-stock-spec-radix",
            True,
            "stock tree, no deterministic inference, the radix cache on",
            reuse=True,
        ),
    )
}
# `measure` without --server: the four servers of docs/performance.md's table
DEFAULT_SERVERS = ["exact-spec", "stock-spec", "exact-no-spec", "stock-no-spec"]


class RunError(RuntimeError):
    """A stage failed; the message names what and where its log is."""


class OutOfTime(RuntimeError):
    """Too little of this call's time is left for the next stage; a rerun resumes."""


def log(message: str) -> None:
    print(f"[perf {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def recipe() -> dict[str, Any]:
    return json.loads(RECIPE.read_text())


def accept_len(spec: ServerSpec) -> float | None:
    """The simulated accept length the recipe variant states (None for a server without speculation)."""
    if not spec.speculative:
        return None
    env = recipe()["variants"][spec.variant].get("env", {})
    if "SGLANG_SIMULATE_ACC_LEN" not in env:
        raise RunError(f"{RECIPE}: variant {spec.variant} states no SGLANG_SIMULATE_ACC_LEN")
    return float(env["SGLANG_SIMULATE_ACC_LEN"])


def model_dirs() -> tuple[Path, Path]:
    r = recipe()
    return REPO / r["model"]["path"], REPO / r["drafter"]["path"]


def check_ready(work: Path) -> None:
    """The assembled trees and the model folders exist (they live only while the GPU machine is held)."""
    missing = [
        str(work / p) for p in ("patched/sglang", "stock/sglang", "deps/.complete") if not (work / p).exists()
    ]
    if missing:
        raise RunError(
            f"not assembled: {', '.join(missing)} missing. Run `bash checks/e2e/host.sh stash ...` and "
            "`bash checks/e2e/host.sh build` first (docs/performance.md, calls 1 and 2); a machine that was "
            "given back between calls starts bare"
        )
    for folder in model_dirs():
        if not (folder / "config.json").exists():
            raise RunError(f"no {folder}/config.json: run `bash bench/perf/host.sh model` first")


# ---- HTTP ----


def post(port: int, path: str, body: dict[str, Any] | None, timeout: float = 60) -> str:
    data = json.dumps(body).encode() if body is not None else b""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", data=data, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return answer.read().decode(errors="replace")
    except urllib.error.HTTPError as error:
        raise RunError(
            f"POST {path}: HTTP {error.code}: {error.read().decode(errors='replace')[:500]}"
        ) from None
    except (urllib.error.URLError, OSError) as error:
        raise RunError(f"POST {path}: {error}") from None


class Stream(threading.Thread):
    """One streaming /generate in the background; counts the chunks that carry tokens."""

    def __init__(self, port: int, ids: list[int], max_new_tokens: int) -> None:
        super().__init__(daemon=True)
        self.port, self.ids, self.max_new_tokens = port, ids, max_new_tokens
        self.chunks = 0
        self.error: str | None = None

    def run(self) -> None:
        body = {
            "input_ids": self.ids,
            "sampling_params": {
                "temperature": 0.0,
                "max_new_tokens": self.max_new_tokens,
                "ignore_eos": True,
            },
            "stream": True,
        }
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/generate",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=600) as answer:
                for raw in answer:
                    if raw.startswith(b"data:") and b"output_ids" in raw:
                        self.chunks += 1
        except Exception as error:  # reported by the caller, which decides whether it matters
            self.error = f"{type(error).__name__}: {error}"


# ---- stages ----


def speculation_phrase(info: dict[str, Any], expected: float) -> str:
    """SGLang's meta_info on speculation, against the stated accept length."""
    tokens = info.get("completion_tokens")
    return (
        f"accept length {float(info.get('spec_accept_length') or 0):.2f} over "
        f"{int(info.get('spec_verify_ct') or 0)} verify steps"
        + (f" of {tokens} tokens" if tokens else "")
        + f" (stated {expected:g}; a step cut short by max_new_tokens lowers the mean)"
    )


def check_meta(spec: ServerSpec, meta: dict[str, Any]) -> dict[str, Any]:
    """meta_info must show speculation at the stated length (spec servers) or no speculation."""
    expected = accept_len(spec)
    verify = int(meta.get("spec_verify_ct") or 0)
    length = meta.get("spec_accept_length")
    if expected is None:
        ok = verify == 0
        why = "no verify steps" if ok else f"{verify} verify steps in a server without speculation"
    else:
        ok = verify > 0 and length is not None and abs(float(length) - expected) <= 0.5
        why = speculation_phrase(meta, expected) if verify else "no verify steps: speculation did not run"
    return {"meta_info": meta, "expected_accept_length": expected, "ok": ok, "check": why}


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
    tokenizer = args.tokenizer or str(model_dirs()[0])
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


def served_recipe(args: argparse.Namespace) -> Path:
    """The recipe the servers start from: RECIPE, or a copy with --max-running-requests replaced."""
    requests = getattr(args, "max_running_requests", None)
    if requests is None:
        return RECIPE
    return lab_servers.recipe_with_running(
        RECIPE, requests, args.results / f"recipe-max-running-{requests}.json"
    )


def max_running(args: argparse.Namespace) -> int:
    """The request slots the servers run with (the recipe's unless --max-running-requests replaced it)."""
    requests = getattr(args, "max_running_requests", None)
    if requests is not None:
        return int(requests)
    argv = recipe()["launch"]["argv"]
    return int(argv[argv.index("--max-running-requests") + 1])


def profile_lengths(text: str) -> list[int]:
    """--profile-prompt: comma-separated token counts, each at least 1."""
    try:
        lengths = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give token counts separated by commas") from None
    if not lengths or min(lengths) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: every length must be 1 or more")
    return lengths


def breakdown_files(folder: Path) -> dict[int, Path]:
    """Profile length -> its breakdown JSON in a server folder (the legacy single profile as 2200)."""
    found = {int(p.stem.split("-", 1)[1]): p for p in folder.glob("breakdown-*.json")}
    legacy = folder / "breakdown.json"
    if legacy.exists() and PROFILE_PROMPT not in found:
        found[PROFILE_PROMPT] = legacy
    return dict(sorted(found.items()))


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


def measure_one(spec: ServerSpec, args: argparse.Namespace, deadline: float) -> None:
    out = args.results / spec.name
    out.mkdir(parents=True, exist_ok=True)
    bench_plan = [b for b in benches(args) if not (out / f"{b[0]}.json").exists()]
    profiles = [] if args.no_profile else [n for n in args.profile_prompt if n not in breakdown_files(out)]
    need_prefill = not args.no_profile and args.prefill_prompt > 0 and not (out / "prefill.json").exists()
    need_reuse = spec.reuse and not (out / "reuse.json").exists()
    if spec.reuse:  # a radix server measures prefix reuse alone
        bench_plan, profiles, need_prefill = [], [], False
    if not (bench_plan or profiles or need_prefill or need_reuse) and (out / "meta.json").exists():
        log(f"{spec.name}: results exist in {out}, skipped")
        return
    if deadline - time.monotonic() < args.start_timeout + 60:
        raise OutOfTime(f"{spec.name}: not enough time left in this call to start a server")
    timings: dict[str, Any] = (
        json.loads((out / "run.json").read_text()) if (out / "run.json").exists() else {}
    )
    timings.update(server=spec.name, tree=spec.tree, variant=spec.variant, accept_len=accept_len(spec))
    timings.update(runs=args.runs, max_running_requests=max_running(args))
    timings.pop("server_restarts", None)  # an earlier call's start, not this one's
    log(f"{spec.name}: starting ({spec.tree} tree, variant {spec.variant})")
    try:
        server = lab_servers.Server(
            args.work, spec.tree, spec.variant, args.port, out / "server.log", served_recipe(args)
        )
    except ValueError as error:  # gpuchecks.trees.TreeError: the launcher could not print the command
        raise RunError(f"{spec.name}: {error}") from None
    except lab_servers.PortTaken as error:
        raise RunError(f"{spec.name}: {error}") from None
    try:
        try:
            timings["ready_s"] = round(server.wait_ready(args.start_timeout), 1)
        except RuntimeError as error:
            raise RunError(f"{spec.name}: {error}") from None
        if server.restarts:  # its pool-sizing failures before it started (lab_servers.Server)
            timings["server_restarts"] = server.restarts
        log(f"{spec.name}: ready after {timings['ready_s']} s")
        meta = check_meta(spec, lab_servers.meta_sample(args.port, list(range(300, 340)), max_new_tokens=128))
        (out / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
        log(f"{spec.name}: {meta['check']}")
        if not meta["ok"]:
            raise RunError(f"{spec.name}: {meta['check']}; see {out / 'meta.json'}")
        pack_if(args, [spec.name])
        for plan in bench_plan:
            name = plan[0]
            remaining = deadline - time.monotonic() - 30
            if remaining < 90:
                raise OutOfTime(f"{spec.name}: not enough time left for {name}")
            began = time.monotonic()
            summary = bench(spec, args, out, args.port, remaining, plan)
            (out / f"{name}.json").write_text(json.dumps(summary, indent=1) + "\n")
            timings[f"{name}_s"] = round(time.monotonic() - began, 1)
            log(f"{spec.name}: {name} done in {timings[f'{name}_s']} s")
            pack_if(args, [spec.name])
        for length in profiles:
            result = traced_stage(
                spec,
                out,
                deadline,
                f"breakdown-{length}.json",
                lambda length=length: profile(spec, args, out, args.port, length),
                breakdown.analyse,
            )
            (out / f"breakdown-{length}.md").write_text(
                breakdown.markdown(result, f"{spec.name}: {spec.description}, {length}-token context")
            )
            timings[f"profile_{length}_s"] = result.pop("_stage_s")
            log(f"{spec.name}: breakdown at {length} tokens written ({result['cycles']} cycles)")
            pack_if(args, [spec.name])
        if need_reuse:
            if deadline - time.monotonic() < 120:
                raise OutOfTime(f"{spec.name}: not enough time left for the reuse stage")
            began = time.monotonic()
            try:
                found_reuse = reuse.measure(
                    lambda path, body, timeout: post(args.port, path, body, timeout),
                    out,
                    prefixes=tuple(args.reuse_prefix),
                    log=lambda line: log(f"{spec.name}: {line}"),
                )
            except reuse.ReuseError as error:
                raise RunError(f"{spec.name}: {error}") from None
            (out / "reuse.json").write_text(json.dumps(found_reuse, indent=1) + "\n")
            timings["reuse_s"] = round(time.monotonic() - began, 1)
            log(f"{spec.name}: reuse written")
        if need_prefill:
            found = traced_stage(
                spec,
                out,
                deadline,
                "prefill.json",
                lambda: prefill_profile(spec, args, out, args.port),
                prefill.analyse,
            )
            (out / "prefill.md").write_text(
                prefill.markdown(found, f"{spec.name}: prefill of {args.prefill_prompt} tokens")
            )
            timings["prefill_profile_s"] = found.pop("_stage_s")
            timings["prefill_prompt"] = args.prefill_prompt  # the tokens the trace's prefill ran
            log(f"{spec.name}: prefill breakdown written ({found['us']['total'] / 1000:.1f} ms of kernels)")
    finally:
        server.stop()
        timings["date_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        report = args.work / "assemble-report.json"
        if report.exists():
            timings["host"] = json.loads(report.read_text()).get("host")
        (out / "run.json").write_text(json.dumps(timings, indent=1) + "\n")
        pack_if(args, [spec.name])


def warm(args: argparse.Namespace) -> int:
    """Start a server until it is ready, then stop it: its Triton kernels compile into the on-disk cache
    (minutes for the exact server's first start), so that a later, measured start is warm. With
    --mem-fraction-static it can share the card with runs that do not time anything."""
    check_ready(args.work)
    spec = SERVERS[args.server]
    args.log.parent.mkdir(parents=True, exist_ok=True)
    recipe = RECIPE
    if args.mem_fraction_static is not None:
        recipe = lab_servers.recipe_with_memory(
            RECIPE, args.mem_fraction_static, args.log.with_suffix(".recipe.json")
        )
    log(f"{spec.name}: warming ({spec.tree} tree, variant {spec.variant})")
    try:
        server = lab_servers.Server(args.work, spec.tree, spec.variant, args.port, args.log, recipe)
    except lab_servers.PortTaken as error:
        raise RunError(f"{spec.name}: {error}") from None
    try:
        ready = server.wait_ready(args.start_timeout)
    except RuntimeError as error:
        raise RunError(f"{spec.name}: {error}; see {args.log}") from None
    finally:
        server.stop()
    log(f"{spec.name}: ready after {ready:.1f} s, stopped")
    return 0


def measure(args: argparse.Namespace) -> int:
    deadline = time.monotonic() + args.deadline_s
    check_ready(args.work)
    names = args.server or DEFAULT_SERVERS
    pack_if(args)  # $OUT starts empty in each call: servers finished in earlier calls come back too
    for name in names:
        measure_one(SERVERS[name], args, deadline)
    return 0


# ---- pack: results -> $OUT (at most 8 files, 16 MiB each) ----


def pack_if(args: argparse.Namespace, names: list[str] | None = None) -> None:
    """Pack `names` (default: this call's servers) into --out, when given."""
    if getattr(args, "out", None):
        pack(args.results, args.out, names or args.server or list(SERVERS))


def pack(results: Path, out: Path, names: list[str]) -> list[Path]:
    """Per server one tarball (its results and both traces) and one text. A tarball over the device tool's
    16 MiB is written again without the traces, which are then named on stderr as left behind."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name in names:
        folder = results / name
        if not folder.is_dir():
            continue
        tarball = out / f"perf-{name}.tar.gz"
        with tarfile.open(tarball, "w:gz") as tar:
            tar.add(folder, arcname=name)
        if tarball.stat().st_size > MAX_FILE_BYTES:
            traces = sorted(str(p) for p in folder.glob("*/*.trace.json.gz"))
            log(f"{tarball} is over the device tool's 16 MiB: packed without {', '.join(traces)}")
            with tarfile.open(tarball, "w:gz") as tar:
                tar.add(
                    folder, arcname=name, filter=lambda t: None if t.name.endswith(".trace.json.gz") else t
                )
        written.append(tarball)
        text = out / f"perf-{name}.txt"
        text.write_text(server_text(folder))
        written.append(text)
    return written


def server_text(folder: Path) -> str:
    parts = []
    for name in ("run.json", "meta.json"):
        if (folder / name).exists():
            parts.append(f"== {name}\n{(folder / name).read_text()}")
    for path in sorted(folder.glob("bench*.json")):
        rows = json.loads(path.read_text()).get("rows", [])
        parts.append(
            f"== {path.stem}\n"
            + "\n".join(
                f"{r['prompt_tokens']} tokens: {r['decode_tps']:.2f} t/s, TTFT {r['ttft_s']:.3f} s"
                for r in rows
            )
        )
    for path in [*sorted(folder.glob("breakdown*.md")), folder / "prefill.md"]:
        if path.exists():
            parts.append(f"== {path.name}\n" + path.read_text())
    return "\n\n".join(parts) + "\n"


# ---- summarize: the tables docs/performance.md holds, from results folders ----


def _load(folder: Path, name: str) -> Any:
    path = folder / name
    return json.loads(path.read_text()) if path.exists() else None


def bench_rows(folder: Path) -> list[dict[str, Any]]:
    """Rows of every bench of a server (bench.json, and tagged ones such as bench-128k.json)."""
    return [
        r for path in sorted(folder.glob("bench*.json")) for r in json.loads(path.read_text()).get("rows", [])
    ]


def meta_line(meta: dict[str, Any]) -> str:
    """The server's own account of speculation in one line (older meta.json kept the full float)."""
    info = meta["meta_info"]
    if not int(info.get("spec_verify_ct") or 0):
        return "no verify steps"
    return speculation_phrase(info, meta["expected_accept_length"])


def consistency(
    benches: dict[str, list[dict[str, Any]]], breakdowns: dict[str, Any], length: int = PROFILE_PROMPT
) -> list[str]:
    """The bench's decode rate against the profile's cycle: the two must describe the same server."""
    lines = []
    for n, result in breakdowns.items():
        row = next((r for r in benches.get(n, []) if r["prompt_tokens"] == length), None)
        if not result or not row:
            continue
        tokens = accept_len(SERVERS[n]) or 1.0
        if not lines:
            lines += [
                "",
                f"Bench against profile at {length} prompt tokens (a cycle: one speculative iteration or "
                "one decode step; kernel sum exceeds busy time where kernels of two streams overlap):",
                "",
                "| server | tokens per cycle | bench ms per cycle | profiled span ms | profiled busy ms | "
                "kernel sum ms |",
                "|---|---:|---:|---:|---:|---:|",
            ]
        per = result["per_cycle_us"]
        lines.append(
            f"| {n} | {tokens:g} | {1000 * tokens / row['decode_tps']:.1f} | {per['span'] / 1000:.1f} | "
            f"{per['busy'] / 1000:.1f} | {per['total'] / 1000:.1f} |"
        )
    return lines


PAIRS = (("exact-spec", "stock-spec"), ("exact-no-spec", "stock-no-spec"))


def ratio_lines(benches: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Exact over stock at each length, for each pair measured: decode t/s and time to first token."""
    pairs = [(e, s) for e, s in PAIRS if benches.get(e) and benches.get(s)]
    if not pairs:
        return []
    lines = [
        "",
        "Exact over stock, side by side in this run (decode t/s ratio: higher is better for exact; TTFT "
        "ratio: lower is better):",
        "",
        "| prompt tokens | " + " | ".join(f"{e}/{s} t/s | {e}/{s} TTFT" for e, s in pairs) + " |",
        "|---:|" + "---:|---:|" * len(pairs),
    ]
    lengths = sorted({r["prompt_tokens"] for e, s in pairs for r in benches[e] + benches[s]})
    for length in lengths:
        cells = []
        for e, s in pairs:
            a = next((r for r in benches[e] if r["prompt_tokens"] == length), None)
            b = next((r for r in benches[s] if r["prompt_tokens"] == length), None)
            cells += [_ratio(a, b, "decode_tps"), _ratio(a, b, "ttft_s")]
        lines.append(f"| {length} | " + " | ".join(cells) + " |")
    return lines


def _ratio(a: dict[str, Any] | None, b: dict[str, Any] | None, key: str) -> str:
    return f"{a[key] / b[key]:.2f}" if a and b and b[key] else "-"


def prefill_lines(prefills: dict[str, Any]) -> list[str]:
    """Each server's profiled prefill, then exact against stock GEMM by GEMM for each pair measured."""
    found = {n: p for n, p in prefills.items() if p}
    if not found:
        return []
    lines = ["## One prefill, GEMM by GEMM", ""]
    for n, p in found.items():
        lines.append(prefill.markdown(p, f"{n}: {SERVERS[n].description}"))
    for e, s in PAIRS:
        if e in found and s in found:
            lines += [f"### {e} against {s}", "", prefill.compare(found[e], found[s], (e, s))]
    return lines


def summarize(results: Path) -> str:
    servers = {name: results / name for name in SERVERS if (results / name).is_dir()}
    if not servers:
        raise RunError(
            f"{results}: no server folders ({', '.join(SERVERS)}); unpack perf-*.tar.gz there first"
        )
    benches = {name: bench_rows(folder) for name, folder in servers.items()}
    metas = {name: _load(folder, "meta.json") for name, folder in servers.items()}
    profiled = {
        name: {n: json.loads(path.read_text()) for n, path in breakdown_files(folder).items()}
        for name, folder in servers.items()
    }
    lengths_profiled = sorted({n for per in profiled.values() for n in per})
    breakdowns = {name: per.get(PROFILE_PROMPT) for name, per in profiled.items()}
    lengths = sorted({r["prompt_tokens"] for rows in benches.values() for r in rows})
    names = list(servers)
    # a section only where something was measured (the radix servers measure reuse alone)
    lines = ["## Decode rate and time to first token (single stream)", ""] if lengths else []
    lines += [
        "| prompt tokens | " + " | ".join(f"{n} t/s | {n} TTFT s" for n in names) + " |",
        "|---:|" + "---:|---:|" * len(names),
    ] if lengths else []  # fmt: skip
    for length in lengths:
        cells = []
        for n in names:
            row = next((r for r in benches[n] if r["prompt_tokens"] == length), None)
            cells += [f"{row['decode_tps']:.1f}", f"{row['ttft_s']:.2f}"] if row else ["-", "-"]
        lines.append(f"| {length} | " + " | ".join(cells) + " |")
    lines.append("")
    for n in names:
        meta = metas[n]
        if meta:
            lines.append(f"- {n} ({SERVERS[n].description}): {meta_line(meta)}.")
    lines += ratio_lines(benches)
    lines += consistency(benches, breakdowns)
    if any(breakdowns.values()):
        lines += ["", "## Where the GPU time goes, per cycle", ""]
        lines += breakdown_sections(names, breakdowns)
    for length in (n for n in lengths_profiled if n != PROFILE_PROMPT):
        at = {name: per.get(length) for name, per in profiled.items()}
        lines += consistency(benches, at, length)
        lines += ["", f"## Where the GPU time goes, per cycle, at {length} tokens of context", ""]
        lines += breakdown_sections(names, at)
    if len(lengths_profiled) > 1:
        lines += every_length_table(names, profiled)
    lines += prefill_lines({name: _load(folder, "prefill.json") for name, folder in servers.items()})
    reused = {name: found for name, folder in servers.items() if (found := _load(folder, "reuse.json"))}
    if reused:
        lines += [""] if lines and lines[-1] else []
        lines += ["## Prefix reuse: time to the first token, shared prefix cached vs computed afresh", ""]
        lines += [reuse.markdown(reused), ""]
    spec_profiles = profiled.get("exact-spec", {})
    if len(lengths_profiled) > 1 and len(spec_profiles) > 1:
        cycles = {
            n: {c: r["per_cycle_us"][c] for c in target_estimate.COMPONENTS} for n, r in spec_profiles.items()
        }
        lines += ["## Target card at every profiled context: a model, not a measurement", ""]
        lines.append(target_estimate.rate_markdown(cycles, accept_len(SERVERS["exact-spec"]) or 1.0))
    for length in lengths_profiled:
        exact, stock = profiled.get("exact-spec", {}).get(length), profiled.get("stock-spec", {}).get(length)
        if not (exact and stock):
            continue
        e_us = {c: exact["per_cycle_us"][c] for c in target_estimate.COMPONENTS}
        s_us = {c: stock["per_cycle_us"][c] for c in target_estimate.COMPONENTS}
        heading = "## Target card: a model, not a measurement"
        lines += [heading if length == PROFILE_PROMPT else f"{heading} ({length} tokens of context)", ""]
        for route in (target_estimate.ROUTE_OVER_CUBLAS, None):
            est = target_estimate.estimate(e_us, s_us, route_over_cublas=route)
            lines.append(target_estimate.markdown(est, e_us, s_us))
    return "\n".join(lines).rstrip() + "\n"


def breakdown_sections(names: list[str], breakdowns: dict[str, Any]) -> list[str]:
    lines = []
    for n in names:
        if breakdowns.get(n):
            tokens = accept_len(SERVERS[n]) or 1.0
            lines.append(breakdown.markdown(breakdowns[n], f"{n}: {SERVERS[n].description}"))
            why = "simulated accept length" if SERVERS[n].speculative else "plain decode"
            per_token = breakdowns[n]["per_cycle_us"]["total"] / tokens
            lines.append(
                f"Tokens per cycle: {tokens:g} ({why}); GPU kernel time per output token "
                f"{per_token:.1f} us.\n"
            )
    return lines


def every_length_table(names: list[str], profiled: dict[str, dict[int, Any]]) -> list[str]:
    """One row per server and profiled context: the components per cycle and attention by step."""
    lines = [
        "## Per cycle at every profiled context (us; attention split by step)",
        "",
        "| server | context tokens | gemm | gdn | attention | rest | total | DRAFT attention "
        "| VERIFY attention |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for n in names:
        for length, result in profiled[n].items():
            us, by_step = result["per_cycle_us"], result["by_step_us"]
            steps = [by_step.get(k, {}).get("attention") for k in ("DRAFT", "VERIFY")]
            cells = [f"{us[c]:.1f}" for c in (*breakdown.COMPONENTS, "total")]
            cells += ["-" if v is None else f"{v:.1f}" for v in steps]
            lines.append(f"| {n} | {length} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="verb", required=True)
    m = sub.add_parser("measure", help="start each server, bench, profile, stop (GPU host)")
    m.add_argument("--work", type=Path, required=True, help="checks/e2e/assemble.py's folder")
    m.add_argument("--results", type=Path, required=True, help="results folder (kept across calls)")
    m.add_argument(
        "--server", action="append", choices=list(SERVERS), help=f"default: {', '.join(DEFAULT_SERVERS)}"
    )
    m.add_argument("--lengths", default=LENGTHS, help=f"bench prompt lengths (default {LENGTHS})")
    m.add_argument(
        "--bench-tag", default="", help="a further bench of other --lengths: bench-TAG.json beside bench.json"
    )
    m.add_argument(
        "--long-lengths",
        default=LONG_LENGTHS,
        help=f"a second bench in the same start, bench-long.json (default {LONG_LENGTHS}; '' for none)",
    )
    m.add_argument("--long-warmup", type=int, default=0, help="warm-ups per long length (default 0)")
    m.add_argument("--new-tokens", type=int, default=NEW_TOKENS)
    m.add_argument("--warmup", type=int, default=1)
    m.add_argument("--runs", type=int, default=1, help="timed runs per length; the median is reported")
    m.add_argument(
        "--max-running-requests",
        type=int,
        help="replace the recipe's request slots (fewer leave longer contexts room; recorded in run.json)",
    )
    m.add_argument("--tokenizer", help="bench prompts' tokenizer (default: the 27B-shaped target's folder)")
    m.add_argument(
        "--profile-prompt",
        type=profile_lengths,
        default=profile_lengths(PROFILE_PROMPTS),
        help=f"profiled contexts, tokens, comma-separated (default {PROFILE_PROMPTS})",
    )
    m.add_argument("--profile-steps", type=int, default=PROFILE_STEPS, help="forward steps profiled")
    m.add_argument(
        "--prefill-prompt",
        type=int,
        default=PREFILL_PROMPT,
        help=f"tokens of the profiled prefill (default {PREFILL_PROMPT}; 0 for none)",
    )
    m.add_argument("--no-profile", action="store_true", help="neither the decode nor the prefill profile")
    m.add_argument(
        "--reuse-prefix",
        type=profile_lengths,
        default=list(reuse.PREFIXES),
        help="the radix servers' shared prefixes, tokens, comma-separated (default 2048,32768)",
    )
    m.add_argument("--port", type=int, default=lab_servers.PORT)
    m.add_argument("--start-timeout", type=float, default=420.0)
    m.add_argument("--deadline-s", type=float, default=560.0, help="this call's time budget")
    m.add_argument("--out", type=Path, help="pack results here after every stage (the device tool's $OUT)")
    w = sub.add_parser("warm", help="start one server until ready and stop it (fills the kernel cache)")
    w.add_argument("--work", type=Path, required=True, help="checks/e2e/assemble.py's folder")
    w.add_argument("--server", required=True, choices=list(SERVERS))
    w.add_argument("--log", type=Path, required=True, help="the server's log")
    w.add_argument("--mem-fraction-static", type=float, help="replace the recipe's (to share the card)")
    w.add_argument("--port", type=int, default=lab_servers.PORT)
    w.add_argument("--start-timeout", type=float, default=900.0)
    p = sub.add_parser("pack", help="copy results into $OUT within the device tool's limits")
    p.add_argument("--results", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--server", action="append", choices=list(SERVERS))
    s = sub.add_parser("summarize", help="the tables and the target-card estimate, from results folders")
    s.add_argument("results", type=Path)
    s.add_argument("--markdown", type=Path, help="write the tables here too")
    args = parser.parse_args(argv)
    try:
        if args.verb == "measure":
            args.results = args.results.resolve()
            return measure(args)
        if args.verb == "warm":
            return warm(args)
        if args.verb == "pack":
            for path in pack(args.results, args.out, args.server or list(SERVERS)):
                print(path)
            return 0
        text = summarize(args.results)
        if args.markdown:
            args.markdown.write_text(text)
        print(text, end="")
        return 0
    except OutOfTime as error:
        log(f"out of time: {error}; rerun the same command to continue")
        return OUT_OF_TIME
    except RunError as error:
        print(f"perf: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    sys.exit(main())
