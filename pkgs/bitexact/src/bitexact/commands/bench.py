"""`bitexact bench ENGINE`: single-stream decode tokens/s and time to first token by prompt length.

Each timed run is appended to `--out`/bench-ENGINE.jsonl as it finishes (keyed like every verb's results:
the engine's identity and the settings), so a rerun after a crash or Ctrl-C measures only what is
missing; a length whose timed runs are all stored is not run again, warm-up included."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import Any

from exactformats.recipe import thawed

from bitexact.argv import MAX_RUNS, MAX_SEED, MAX_TOKENS, MAX_VOCAB, count, parse_lengths
from bitexact.engines.base import Timing
from bitexact.engines.factory import open_engine
from bitexact.errors import EngineError
from bitexact.helptext import ENGINE, verb_parser
from bitexact.longprompts import long_prompt
from bitexact.options import (
    add_out_options,
)
from bitexact.output import emit, report_paths, write_reports
from bitexact.presets import BENCH_LENGTHS, load_recipe
from bitexact.progress import Progress
from bitexact.prompts import Prompt, load_tokenizer
from bitexact.report.html import bench_html
from bitexact.report.markdown import bench_markdown
from bitexact.results import ResultStore
from bitexact.runner import STALL_S
from bitexact.runs import Engines
from bitexact.sides import keyed_store


def add_parser(sub: Any) -> None:
    p = verb_parser(sub, "bench", help="single-stream decode t/s and time to first token")
    p.add_argument("engine", help=ENGINE)
    p.add_argument(
        "--lengths", help="prompt lengths in tokens, e.g. 640,2200,128k (default: the recipe's preset)"
    )
    p.add_argument("--recipe", help="recipe JSON: its reference figures are printed alongside")
    p.add_argument(
        "--new-tokens",
        type=count(2, MAX_TOKENS),
        default=256,
        help="tokens generated per timed run (decode t/s is over them)",
    )
    p.add_argument("--warmup", type=count(0, MAX_RUNS), default=1, help="untimed runs before the timed ones")
    p.add_argument(
        "--runs", type=count(1, MAX_RUNS), default=1, help="timed runs per length (the median is reported)"
    )
    p.add_argument("--tokenizer", help="a local tokenizer folder or 'bytes' (prompts become real text)")
    p.add_argument(
        "--vocab-size", type=count(2, MAX_VOCAB), help="without a tokenizer: random ids below this"
    )
    p.add_argument("--seed", type=count(0, MAX_SEED), default=0, help="seed of the prompt generator")
    p.add_argument(
        "--allow-short",
        action="store_true",
        help="keep runs in which the server returned fewer than --new-tokens tokens (flagged in the "
        "report); without it such a run is an error, since t/s over a short answer is not comparable",
    )
    add_out_options(p, "timings (JSONL, resumable) and reports")
    p.set_defaults(run=run)


def _median(values: list[float]) -> float:
    s = sorted(values)
    return s[len(s) // 2] if len(s) % 2 else (s[len(s) // 2 - 1] + s[len(s) // 2]) / 2


def _timing(data: dict[str, Any]) -> Timing:
    return Timing(
        prompt_tokens=int(data["prompt_tokens"]),
        new_tokens=int(data["new_tokens"]),
        ttft_s=float(data["ttft_s"]),
        decode_s=float(data["decode_s"]),
    )


def _measure(
    engine: Any,
    prompts: list[Prompt],
    args: argparse.Namespace,
    store: ResultStore,
    bar: Progress,
) -> dict[str, Timing]:
    """Every (length, run) timing, stored ones first; new ones are appended as they finish."""
    items = {f"{p.id}#run{r}": p for p in prompts for r in range(args.runs)}
    stored = store.load_rows({item: p.digest() for item, p in items.items()}, "timing")
    done = {item: _timing(data) for item, data in stored.items()}
    if done:
        bar.advance(len(done), "(resumed)")
    for prompt in prompts:
        todo = [r for r in range(args.runs) if f"{prompt.id}#run{r}" not in done]
        if not todo:
            continue
        for _ in range(args.warmup):
            engine.timed(prompt, args.new_tokens)
        for r in todo:
            timing = engine.timed(prompt, args.new_tokens)
            item = f"{prompt.id}#run{r}"
            store.append_row(item, prompt.digest(), "timing", dataclasses.asdict(timing))
            done[item] = timing
            bar.advance(1, f"{len(prompt.input_ids or ())} tokens")
    short = [t for t in done.values() if t.new_tokens < args.new_tokens]
    if short and not args.allow_short:
        t = short[0]
        raise EngineError(
            f"a run at {t.prompt_tokens} prompt tokens returned {t.new_tokens} of the {args.new_tokens} new "
            f"tokens asked ({len(short)} short run(s)): the server stopped early (its context length, a cap "
            "on new tokens, or an abort), and t/s over a short answer is not comparable; fix the server, "
            "or pass --allow-short to keep such runs (the report flags them)"
        )
    return done


def run(args: argparse.Namespace, engines: Engines) -> int:
    spec = engines["engine"]  # parsed before any prompt is built: a malformed string fails first
    lengths = parse_lengths(args.lengths, MAX_TOKENS) if args.lengths else list(BENCH_LENGTHS)
    tokenizer = load_tokenizer(args.tokenizer) if args.tokenizer else None
    reference = thawed(load_recipe(args.recipe).reference) if args.recipe else None
    # Prompts first: a usage error should not wait for a server or a model to load.
    prompts = [
        long_prompt(n, seed=args.seed + i, tokenizer=tokenizer, vocab_size=args.vocab_size)
        for i, n in enumerate(lengths)
    ]
    report_paths(args.out, "bench")  # bitexact's in --out, or refused before the run (ownership.py)
    engine = open_engine(spec)
    bar = Progress(f"bench {args.engine}", len(prompts) * args.runs)
    try:
        identity = engine.identity()
        store = keyed_store(args.out, "bench", spec, identity, {"new_tokens": args.new_tokens})
        bar.watch(STALL_S)
        try:
            timings = _measure(engine, prompts, args, store, bar)
        except KeyboardInterrupt:
            print(
                f"\nbitexact: bench interrupted; finished runs kept in {store.path}; rerun to resume",
                file=sys.stderr,
            )
            raise
        except EngineError as exc:
            raise EngineError(
                f"bench {args.engine}: {exc}\nstopped: finished runs kept in {store.path}; "
                "rerun the same command to resume"
            ) from exc
    finally:
        bar.stop()
        engine.close()
    rows = []
    for prompt in prompts:
        runs = [timings[f"{prompt.id}#run{r}"] for r in range(args.runs)]
        rows.append(
            {
                "prompt_tokens": runs[0].prompt_tokens,
                "new_tokens": runs[0].new_tokens,
                "runs": len(runs),
                "ttft_s": _median([t.ttft_s for t in runs]),
                "decode_tps": _median([t.decode_tps for t in runs]),
                "short": min(t.new_tokens for t in runs) < args.new_tokens,
            }
        )
    summary: dict[str, Any] = {
        "verb": "bench",
        "title": f"bench of {args.engine}",
        "engine": args.engine,
        "identity": identity,
        "rows": rows,
        "reference": reference,
        "results": str(store.path),
    }
    summary["reports"] = write_reports(args.out, "bench", bench_markdown(summary), bench_html(summary))
    summary["asked_new_tokens"] = args.new_tokens
    shown = ", ".join(
        f"{r['prompt_tokens']} tokens {r['decode_tps']:.1f} t/s" + (" (SHORT)" if r["short"] else "")
        for r in rows
    )
    emit(summary, args.json, f"bench: finished: {shown}; report: {summary['reports'][1]}")
    return 0
