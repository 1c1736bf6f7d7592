"""The 27B-shaped model's goldens on a GPU host without Nix: record this card's, and check the served bits
against the committed ones (the card's own golden, or its family's: checks/golden/families.json).

The flake's record-golden and gpu-golden steps do this for the recipe they check, at the plan's long
lengths (16k, 64k, 128k). The 27B shape's golden holds 16k only (two more long prompts cost minutes a
server), so the lab runs the same bitexact commands at its own --long, on one server of the patched tree
started as the runner starts it (lab_servers.Server):
1. `bitexact golden record` (the prompts, then the long prompts) into --recorded, to compare and commit;
2. with --check, `bitexact golden check` (the same two) against --golden-dir (its history lines go under
   --out): this card's own golden, or its family's where it is a member.

Usage (repository root, GPU host, after lab/card/host.sh stash/build and lab/perf/host.sh model):
    python -m lab.perf.goldens --work WORK --recorded DIR --out DIR [--long 16k] [--check --golden-dir DIR]
Exit status: the worst command's (0 equal / recorded, 1 a difference, 2 an error named on stderr)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from lab.perf import lab_servers, perf_servers
from lab.perf.run_errors import RunError

VARIANT = "recipe"  # what a golden records: the recipe as published, speculation on


def commands(args: argparse.Namespace, url: str, build_info: Path) -> list[tuple[str, list[str]]]:
    """(name, bitexact argv) in order: record the prompts and the long prompts, then check both."""
    recipe = str(perf_servers.RECIPE)
    tokenizer = str(perf_servers.model_dirs()[0])
    long = ["--long", args.long, "--tokenizer", tokenizer]
    record = ["bitexact", "golden", "record", url, "--recipe", recipe, "--variant", VARIANT]
    record += ["--golden-dir", str(args.recorded), "--build-info", str(build_info)]
    if args.build_id:
        record += ["--build-id", args.build_id]
    check = ["bitexact", "golden", "check", url, "--recipe", recipe, "--variant", VARIANT]
    check += ["--golden-dir", str(args.golden_dir), "--build-info", str(build_info), "--json"]
    check += ["--history", str(args.out / "history.jsonl")]
    planned = [
        ("record", [*record, "--out", str(args.out / "record")]),
        ("record-long", [*record, *long, "--out", str(args.out / "record-long")]),
    ]
    if args.check:
        planned += [
            ("check", [*check, "--out", str(args.out / "check")]),
            ("check-long", [*check, *long, "--out", str(args.out / "check-long")]),
        ]
    return planned


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, required=True, help="lab/card/assemble.py's folder")
    parser.add_argument("--recorded", type=Path, required=True, help="golden dir this card's records go to")
    parser.add_argument("--check", action="store_true", help="check against --golden-dir after recording")
    parser.add_argument("--golden-dir", type=Path, help="the committed goldens (default: checks/golden)")
    parser.add_argument("--out", type=Path, required=True, help="reports, history lines, results.json")
    parser.add_argument("--long", default="16k", help="long prompt lengths (default 16k: the golden's)")
    parser.add_argument("--build-id", help="the build's name in the RECORDED history line")
    parser.add_argument("--port", type=int, default=lab_servers.PORT)
    parser.add_argument("--start-timeout", type=float, default=900.0)
    args = parser.parse_args(argv)
    args.golden_dir = args.golden_dir or lab_servers.REPO / "checks" / "golden"
    try:
        perf_servers.check_ready(args.work)
    except RunError as error:
        print(f"goldens: {error}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    args.recorded.mkdir(parents=True, exist_ok=True)
    build_info = args.out / "build-info.json"
    try:
        build_info.write_text(lab_servers.tree_of(args.work, "patched").build_info(perf_servers.RECIPE))
        server = lab_servers.Server(
            args.work, "patched", VARIANT, args.port, args.out / "server.log", perf_servers.RECIPE
        )
    except (ValueError, RuntimeError) as error:  # gpuchecks' TreeError, PortTaken
        print(f"goldens: {error}", file=sys.stderr)
        return 2
    results: list[dict[str, Any]] = []
    try:
        ready = server.wait_ready(args.start_timeout)
        lab_servers.log(f"goldens: the patched recipe server is ready after {ready:.0f} s")
        for name, command in commands(args, f"sglang+http://127.0.0.1:{args.port}", build_info):
            result = lab_servers.run_bitexact(command, args.work, "patched", args.out / "bitexact.log")
            results.append({"name": name, **result})
            lab_servers.log(f"goldens: {name}: exit {result['exit']} after {result['seconds']} s")
            (args.out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
            if name.startswith("record") and result["exit"] != 0:
                break  # nothing recorded to compare; the check would meet the same failure
    except RuntimeError as error:  # the server did not start (gpuchecks.servers.ServerFailed)
        print(f"goldens: {error}; see {args.out / 'server.log'}", file=sys.stderr)
        return 2
    finally:
        server.stop()
    codes = [r["exit"] for r in results]
    return 2 if any(c not in (0, 1) for c in codes) else max(codes, default=2)


if __name__ == "__main__":
    sys.exit(main())
