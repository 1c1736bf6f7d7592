"""A server's measurement from start to stop (`measure`), and a start that only fills the kernel cache
(`warm`).

Per server, each stage is written as it finishes and skipped on a rerun when its output exists:
1. start (lab_servers.py's Server; host settings as there) and wait for /health_generate;
2. `meta.json`: one /generate's meta_info, checked (speculation at the stated length, or none);
3. `bench.json` + `bench/`: `bitexact bench` at --lengths (single stream, decode t/s and time to first
   token; its JSONL resumes per length), then `bench-long.json` + `bench-long/` at --long-lengths with
   --long-warmup warm-ups (default 131072 tokens, none: the server has prefilled 32768 by then, and with
   chunked prefill every chunk of a longer prompt has the shapes a 32768 prompt had); `--bench-tag TAG
   --lengths L` adds `bench-TAG.json` later without redoing the rest;
4. `breakdown-<L>.json` + `profile-<L>/` for each L of --profile-prompt (default 2200, 32768, 131072): a
   streaming request at L tokens, SGLang's /start_profile for --profile-steps forward steps (activities
   CPU and GPU, no stacks, no shapes), then lab/perf/breakdown.py on the trace (results of earlier runs
   named `breakdown.json` + `profile/` are read as the 2200-token profile);
5. the radix servers only: `reuse.json` + `reuse.jsonl` (lab/perf/reuse.py: time to the first token with
   a shared prefix of --reuse-prefix tokens from the cache against computed afresh);
6. `prefill.json` + `prefill/`: /start_profile with shapes recorded, one request of --prefill-prompt
   tokens (max_new_tokens 1), /stop_profile, then lab/perf/prefill.py on the trace: the prefill's GPU
   time by component and GEMM by GEMM;
then the server stops and `run.json` records the timings. `--out` packs the results into the device tool's
$OUT after every stage (pack.py).
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from lab.perf import breakdown, lab_servers, prefill, reuse
from lab.perf.pack import pack_if
from lab.perf.perf_servers import (
    DEFAULT_SERVERS,
    RECIPE,
    SERVERS,
    ServerSpec,
    accept_len,
    check_meta,
    check_ready,
    max_running,
    served_recipe,
)
from lab.perf.results_layout import breakdown_files
from lab.perf.run_errors import OutOfTime, RunError, log
from lab.perf.sglang_http import post
from lab.perf.stages import bench, benches, prefill_profile, profile, traced_stage


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
