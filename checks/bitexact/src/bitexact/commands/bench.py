"""`bitexact bench ENGINE`: single-stream decode tokens/s and time to first token by prompt length."""

from __future__ import annotations

import argparse
from typing import Any

from bitexact.commands.common import emit, parse_lengths
from bitexact.engines.factory import open_engine
from bitexact.errors import UsageError
from bitexact.longprompts import long_prompt
from bitexact.presets import BENCH_LENGTHS, load_recipe
from bitexact.progress import Progress
from bitexact.prompts import load_tokenizer


def add_parser(sub: Any) -> None:
    p = sub.add_parser("bench", help="single-stream decode t/s and time to first token")
    p.add_argument("engine")
    p.add_argument(
        "--lengths", help="prompt lengths in tokens (e.g. 640,2200,128k); default the recipe's preset"
    )
    p.add_argument("--recipe", help="recipe JSON: its reference figures are printed alongside")
    p.add_argument("--new-tokens", type=int, default=256)
    p.add_argument("--warmup", type=int, default=1, help="untimed runs before the timed ones")
    p.add_argument("--runs", type=int, default=1, help="timed runs per length (the median is reported)")
    p.add_argument("--tokenizer", help="a local tokenizer folder or 'bytes' (prompts become real text)")
    p.add_argument("--vocab-size", type=int, help="without a tokenizer: random ids below this")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=run)


def _median(values: list[float]) -> float:
    s = sorted(values)
    return s[len(s) // 2] if len(s) % 2 else (s[len(s) // 2 - 1] + s[len(s) // 2]) / 2


def run(args: argparse.Namespace) -> int:
    lengths = parse_lengths(args.lengths) if args.lengths else list(BENCH_LENGTHS)
    if args.new_tokens < 2 or args.runs < 1:
        raise UsageError("--new-tokens must be >= 2 and --runs >= 1")
    tokenizer = load_tokenizer(args.tokenizer) if args.tokenizer else None
    reference = load_recipe(args.recipe)["reference"] if args.recipe else None
    # Prompts first: a usage error should not wait for a server or a model to load.
    prompts = [
        long_prompt(n, seed=args.seed + i, tokenizer=tokenizer, vocab_size=args.vocab_size)
        for i, n in enumerate(lengths)
    ]
    engine = open_engine(args.engine)
    rows = []
    try:
        identity = engine.identity()
        bar = Progress(f"bench {args.engine}", len(lengths) * (args.runs + args.warmup))
        for n, prompt in zip(lengths, prompts, strict=True):
            timings = []
            for run_index in range(args.warmup + args.runs):
                timing = engine.timed(prompt, args.new_tokens)
                if run_index >= args.warmup:
                    timings.append(timing)
                bar.advance(1, f"{n} tokens")
            rows.append(
                {
                    "prompt_tokens": timings[0].prompt_tokens,
                    "new_tokens": timings[0].new_tokens,
                    "ttft_s": _median([t.ttft_s for t in timings]),
                    "decode_tps": _median([t.decode_tps for t in timings]),
                }
            )
    finally:
        engine.close()
    summary = {
        "verb": "bench",
        "engine": args.engine,
        "identity": identity,
        "rows": rows,
        "reference": reference,
    }
    table = ["| prompt tokens | new tokens | TTFT s | decode t/s |", "|---|---|---|---|"]
    table += [
        f"| {r['prompt_tokens']} | {r['new_tokens']} | {r['ttft_s']:.3f} | {r['decode_tps']:.1f} |"
        for r in rows
    ]
    if reference:
        figures = reference.get("decodeTokensPerSecond", {})
        table.append(f"recipe's reference, decode t/s at {figures.get('promptTokens')} prompt tokens:")
        table += [f"  {name}: {values}" for name, values in figures.items() if name != "promptTokens"]
    emit(summary, args.json, "\n".join(table))
    return 0
