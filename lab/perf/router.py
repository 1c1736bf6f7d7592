"""N replicas of the tiny hybrid model behind SGLang's router, on one GPU host with no network (issue 21).

The patched tree's fleet is the launcher's own (`python -m exactlaunch.cli --replicas N --port P`); the
stock tree's is the plan that `--print` gives, run by `python -m exactlaunch.fleet` (the launcher's
preflight rightly refuses a stock tree). Through the router:

- `bitexact repeat` (every prompt many times, 8 in flight; round-robin spreads them over the replicas):
  0 divergent runs is the claim;
- `bitexact parity ROUTER REPLICA-0` (8 in flight through the router, one at a time on replica 0);
- `bitexact golden check ROUTER` against a golden (this card's, or a reference), 8 in flight.
Each replica's log is kept, and the number of batches each one ran is counted from it.

Usage (repository root, after assemble.py and tiny_model.py; sglang_router importable from --router-site):
    python -m lab.perf.router --work WORK --tree patched --out OUT --router-site DIR [--golden FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from gpuchecks import ports

from lab.card import runner_args as ra  # (the runners' strict command lines)
from lab.perf import lab_servers  # (the product runner's servers, the lab's host settings)

REPO = lab_servers.REPO
RECIPE = REPO / "nix" / "recipes" / "e2e-tiny-hybrid.json"
BATCH_LINE = re.compile(r"(Prefill|Decode) batch")


def wait_http(url: str, proc: subprocess.Popen[bytes], timeout_s: float) -> float:
    begun = time.monotonic()
    while time.monotonic() - begun < timeout_s:
        if proc.poll() is not None:
            raise RuntimeError(f"the fleet exited with {proc.returncode} before {url} answered")
        if lab_servers.answers(url):
            return time.monotonic() - begun
        time.sleep(1)
    raise RuntimeError(f"{url} did not answer within {timeout_s:.0f} s")


def fleet_command(args: argparse.Namespace, recipe: Path, env: dict[str, str], out: Path) -> list[str]:
    """The fleet's argv: the launcher for the patched tree; the printed plan run directly for the stock."""
    launch = [sys.executable, "-m", "exactlaunch.cli", "--recipe", str(recipe), "--variant", args.variant]
    launch += ["--replicas", str(args.replicas), "--host", "127.0.0.1", "--port", str(args.port)]
    if lab_servers.through_launcher(args.work, args.tree):
        return [*launch, "--log-dir", str(out / "logs")]
    printed = subprocess.run([*launch, "--print"], env=env, capture_output=True, text=True, check=True)
    plan_file = out / "fleet-plan.json"
    plan_file.write_text(printed.stdout)
    env.update(json.loads(printed.stdout)["env"])
    return [sys.executable, "-m", "exactlaunch.fleet", str(plan_file), str(out / "logs")]


def batches_per_replica(logs: Path) -> dict[str, int]:
    return {
        log.stem: sum(1 for line in log.read_text(errors="replace").splitlines() if BATCH_LINE.search(line))
        for log in sorted(logs.glob("replica-*.log"))
    }


@ra.one_line("lab/perf/router.py")
def main(argv: list[str] | None = None) -> int:
    parser = ra.strict_parser(description=__doc__.split("\n\n")[0])
    once = {"action": ra.Once}
    parser.add_argument("--work", type=Path, required=True, **once)
    parser.add_argument(
        "--tree", type=ra.name, required=True, help="a tree under WORK: patched, stock, ...", **once
    )
    parser.add_argument("--out", type=Path, required=True, **once)
    parser.add_argument(
        "--router-site", type=Path, required=True, help="a folder sglang_router imports from", **once
    )
    parser.add_argument("--replicas", type=ra.count, default=2, **once)
    parser.add_argument("--variant", type=ra.name, default="recipe", **once)
    parser.add_argument(
        "--port", type=ra.port, default=30100, help="the router's; replica i takes port + 1 + i", **once
    )
    parser.add_argument(
        "--mem-fraction-static",
        type=ra.fraction,
        help="the fleet's share of the card (the replicas divide it)",
        **once,
    )
    parser.add_argument("--golden", type=Path, help="a golden to check the router's answers against", **once)
    parser.add_argument("--repeats", type=ra.count, default=20, **once)
    parser.add_argument("--start-timeout", type=ra.seconds, default=900.0, **once)
    args = parser.parse_args(argv)
    if args.port + args.replicas > 65535:
        parser.error(f"--port {args.port} leaves no room for {args.replicas} replicas")
    if not (args.work / args.tree / "sglang").is_dir():
        parser.error(f"no tree {args.work / args.tree}: assemble.py build makes patched/ and stock/")
    if not (args.router_site / "sglang_router").is_dir():
        parser.error(
            f"--router-site {args.router_site}: no sglang_router in it; install the wheel there "
            "(pip install --no-deps --target DIR sglang_router-0.3.2-*.whl)"
        )
    if args.golden is not None and not args.golden.is_file():
        parser.error(f"--golden {args.golden}: no such file")

    out = args.out / args.tree
    out.mkdir(parents=True, exist_ok=True)
    recipe = RECIPE
    if args.mem_fraction_static is not None:
        recipe = lab_servers.recipe_with_memory(recipe, args.mem_fraction_static, out / "recipe.json")
    taken = [p for p in range(args.port, args.port + args.replicas + 1) if not ports.port_free(p)]
    if taken:
        lab_servers.log(f"error: ports {taken} are taken; stop what holds them or pass another --port")
        return 2
    env = lab_servers.base_env(args.work, args.tree, recipe)
    env["PYTHONPATH"] = os.pathsep.join([str(args.router_site), env["PYTHONPATH"]])
    argv_fleet = fleet_command(args, recipe, env, out)
    lab_servers.log(f"starting {args.replicas} {args.tree} replicas and the router: {' '.join(argv_fleet)}")
    log_file = (out / "fleet.log").open("w")
    proc = subprocess.Popen(
        argv_fleet, cwd=REPO, env=env, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True
    )
    router = f"http://127.0.0.1:{args.port}"
    url = f"sglang+{router}"
    results: list[dict[str, Any]] = []
    try:
        ready = wait_http(f"{router}/health", proc, args.start_timeout)
        lab_servers.log(f"router ready after {ready:.0f} s")
        replica0 = f"sglang+http://127.0.0.1:{args.port + 1}"
        commands = [
            ["bitexact", "repeat", url, "--repeats", str(args.repeats), "--batch", "8"]
            + ["--out", str(out / "repeat"), "--json"],
            ["bitexact", "parity", url, replica0, "--inflight-a", "8", "--inflight-b", "1"]
            + ["--out", str(out / "parity"), "--json"],
        ]
        if args.golden:
            commands.append(
                ["bitexact", "golden", "check", url, "--recipe", str(recipe), "--variant", args.variant]
                + ["--golden", str(args.golden), "--no-history", "--inflight", "8"]
                + ["--out", str(out / "golden"), "--json"]
            )
        for command in commands:
            result = lab_servers.run_bitexact(command, args.work, args.tree, out / "bitexact.log")
            lab_servers.log(f"{command[1]}: exit {result['exit']}")
            results.append(result)
    except RuntimeError as error:
        results.append({"exit": 2, "error": str(error)})
        lab_servers.log(f"error: {error}")
    finally:
        lab_servers.stop_group(proc, 60)  # the launcher stops its replicas and router in that time
        log_file.close()
    entry = {
        "tree": args.tree,
        "replicas": args.replicas,
        "batches_per_replica": batches_per_replica(out / "logs"),
        "exit": max(r["exit"] for r in results),
        "results": results,
    }
    (out / "verdict.json").write_text(json.dumps(entry, indent=1) + "\n")
    lab_servers.log(f"{args.tree}: exit {entry['exit']}, batches per replica {entry['batches_per_replica']}")
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    sys.exit(main())
