"""`bitexact repeat ENGINE`: each prompt N times in groups of B; how many answers differ from the first."""

from __future__ import annotations

import argparse
from typing import Any

from bitexact.argv import MAX_IN_FLIGHT, MAX_REPEATS, count
from bitexact.compare import compare
from bitexact.errors import UsageError
from bitexact.helptext import ENGINE, verb_parser
from bitexact.options import (
    PromptOptions,
    add_prompt_options,
    resolve_prompts,
    settings_of,
)
from bitexact.output import emit, report_paths, write_reports
from bitexact.prompts import Prompt
from bitexact.report.fmt import compared_text
from bitexact.report.html import repeat_html
from bitexact.report.markdown import repeat_markdown
from bitexact.runs import Engines
from bitexact.sides import run_side
from bitexact.summary import compared


def add_parser(sub: Any) -> None:
    p = verb_parser(sub, "repeat", help="run-to-run repeatability: the same requests N times")
    p.add_argument("engine", help=ENGINE)
    p.add_argument("--repeats", "-n", type=count(2, MAX_REPEATS), default=50, help="requests per prompt")
    p.add_argument(
        "--batch",
        "-b",
        type=count(1, MAX_IN_FLIGHT),
        default=8,
        help="requests sent together (batch or in flight)",
    )
    add_prompt_options(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace, engines: Engines) -> int:
    spec = engines["engine"]
    if spec.kind == "hf" and "assistant" in spec.params and args.batch > 1:
        raise UsageError("repeat with an assistant (speculative decoding in transformers) needs --batch 1")
    settings = settings_of(args.max_new_tokens, args.top_logprobs)
    base = resolve_prompts(
        PromptOptions(args.prompts, args.long, args.limit, args.tokenizer, args.vocab_size, args.seed), [spec]
    )
    report_paths(args.out, "repeat")  # bitexact's in --out, or refused before the run (ownership.py)
    copies = [
        Prompt(id=f"{p.id}#r{i}", input_ids=p.input_ids, text=p.text)
        for p in base
        for i in range(args.repeats)
    ]
    gens, identity = run_side(
        spec,
        copies,
        settings,
        args.out,
        "repeat",
        inflight=args.batch,
        group=args.batch,
        tokenizer=args.tokenizer,
    )
    per_prompt: list[dict[str, Any]] = []
    all_comps: list[dict[str, Any]] = []
    for k, prompt in enumerate(base):
        mine = gens[k * args.repeats : (k + 1) * args.repeats]
        comps = [compare(mine[0], g) for g in mine[1:]]
        all_comps += [c.to_json() for c in comps]
        per_prompt.append(
            {
                "prompt_id": prompt.id,
                "compared": len(comps),
                "divergent": sum(not c.equal for c in comps),
                "token_divergent": sum(not c.tokens_equal for c in comps),
                "positions": [c.first_divergence for c in comps if not c.equal],
            }
        )
    summary = {
        "verb": "repeat",
        "title": f"repeatability of {args.engine}",
        "engine": args.engine,
        "identity": identity,
        "repeats": args.repeats,
        "batch": args.batch,
        "settings": settings.to_json(),
        "compared": sum(r["compared"] for r in per_prompt),
        "compared_values": compared(all_comps, settings.to_json(), unit="repeat"),
        "divergent": sum(r["divergent"] for r in per_prompt),
        "token_divergent": sum(r["token_divergent"] for r in per_prompt),
        "per_prompt": per_prompt,
    }
    summary["reports"] = write_reports(args.out, "repeat", repeat_markdown(summary), repeat_html(summary))
    verdict = "REPEATABLE" if summary["divergent"] == 0 else "NOT REPEATABLE"
    emit(
        summary,
        args.json,
        f"repeat: {verdict}: {summary['divergent']}/{summary['compared']} repeats differ from the first "
        f"({summary['token_divergent']} in token ids, the rest in logprobs or top-k only); "
        f"compared: {compared_text(summary['compared_values'])}; report: {summary['reports'][1]}",
    )
    return 0 if summary["divergent"] == 0 else 1
