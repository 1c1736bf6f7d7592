"""What exactness costs end to end (issues 11, 18): four SGLang servers of the 27B-shaped model on one GPU.

The command line of the perf lab; each job lives in a module of its own beside this file:
- perf_servers.py: the servers (exact and stock, speculation on and off, the radix and window variants),
  the recipe they start from, and what their meta_info must show;
- measure.py: a server from start to stop, stage by stage (stages.py: bench, decode and prefill profiles;
  sglang_http.py: the requests), each stage's output kept so that a rerun resumes;
- pack.py: the results into the device tool's $OUT;
- summary.py: the tables docs/performance.md holds, from a results folder (results_layout.py reads it);
- run_errors.py: the errors and the exit statuses below.

Usage (repository root, GPU host, after lab/card/host.sh stash/build and lab/perf/host.sh model):
    python -m lab.perf.run measure --work WORK --results DIR --server exact-spec --out "$OUT"
    python -m lab.perf.run warm --work WORK --server exact-spec --log FILE [--mem-fraction-static F]
    python -m lab.perf.run pack --results DIR --out "$OUT"
    python -m lab.perf.run summarize DIR [--markdown FILE]      # here too: the tables, from results
Exit status: 0 done, 2 an error (named on stderr), 3 out of time in this call (rerun the same command).
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from lab.perf import lab_servers, reuse
from lab.perf.measure import measure, warm
from lab.perf.pack import pack
from lab.perf.perf_servers import DEFAULT_SERVERS, SERVERS
from lab.perf.run_errors import OUT_OF_TIME, OutOfTime, RunError, log
from lab.perf.summary import summarize

# the defaults of `measure`
LENGTHS = "640,2200,32768"
LONG_LENGTHS = "131072"
PREFILL_PROMPT = 32768
NEW_TOKENS = 128
PROFILE_PROMPTS = "2200,32768,131072"
PROFILE_STEPS = 6


def profile_lengths(text: str) -> list[int]:
    """--profile-prompt: comma-separated token counts, each at least 1."""
    try:
        lengths = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give token counts separated by commas") from None
    if not lengths or min(lengths) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: every length must be 1 or more")
    return lengths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="verb", required=True)
    m = sub.add_parser("measure", help="start each server, bench, profile, stop (GPU host)")
    m.add_argument("--work", type=Path, required=True, help="lab/card/assemble.py's folder")
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
    w.add_argument("--work", type=Path, required=True, help="lab/card/assemble.py's folder")
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
