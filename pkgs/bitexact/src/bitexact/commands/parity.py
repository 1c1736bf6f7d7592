"""`bitexact parity A B`: the same prompts on two engines, token ids and logprobs compared bitwise."""

from __future__ import annotations

import argparse
from typing import Any

from bitexact import runs
from bitexact.argv import MAX_IN_FLIGHT, count
from bitexact.engines.factory import open_engine
from bitexact.engines.instance import same_engine
from bitexact.engines.spec import HTTP_KINDS, EngineSpec
from bitexact.errors import UsageError
from bitexact.helptext import verb_parser
from bitexact.names import name_option
from bitexact.options import (
    PromptOptions,
    add_prompt_options,
    report_tokenizer,
    resolve_prompts,
    settings_of,
)
from bitexact.output import emit, report_paths, write_comparison
from bitexact.presets import LONG_LENGTHS, Side, load_recipe, make_preset
from bitexact.report.fmt import compared_text, not_argmax_text
from bitexact.runs import Engines
from bitexact.sides import run_side
from bitexact.speccheck import REQUIREMENTS, check_spec, spec_summary
from bitexact.summary import comparison_summary


def add_parser(sub: Any) -> None:
    p = verb_parser(sub, "parity", help="compare two engines token by token, logprob by logprob")
    p.add_argument("a", help="engine A (e.g. the recipe's server)")
    p.add_argument("b", help="engine B (the reference, e.g. the no-spec server)")
    p.add_argument(
        "--preset",
        type=name_option,
        help="a recipe variant (recipe, forced-reject, inflight-8, ...) or 'long'",
    )
    p.add_argument("--recipe", help="recipe JSON for presets (default: $BITEXACT_RECIPE)")
    p.add_argument(
        "--spec-a", choices=REQUIREMENTS, help="must A speculate? (default: the preset's, else any)"
    )
    p.add_argument(
        "--spec-b", choices=REQUIREMENTS, help="must B speculate? (default: the preset's, else any)"
    )
    p.add_argument(
        "--inflight-a", type=count(1, MAX_IN_FLIGHT), help="requests in flight on A (HTTP engines)"
    )
    p.add_argument(
        "--inflight-b", type=count(1, MAX_IN_FLIGHT), help="requests in flight on B (HTTP engines)"
    )
    p.add_argument(
        "--name", type=name_option, help="file name stem of the reports (default: parity or parity-PRESET)"
    )
    p.add_argument(
        "--allow-same-engine",
        action="store_true",
        help="compare an engine with itself, asked the same way on both sides: a repeat check, not parity; "
        "the verdict says so (with --inflight-a/--inflight-b that differ it is a batching check, allowed)",
    )
    add_prompt_options(p)
    p.set_defaults(run=run)


def probe_identity(spec: EngineSpec) -> dict[str, Any] | None:
    """What an HTTP engine says about itself (a few GETs, before any prompt runs); None for an engine in
    process (loading a model twice to ask would cost minutes: its folder's real path tells instead)."""
    if spec.kind not in HTTP_KINDS:
        return None
    engine = open_engine(spec)
    try:
        return engine.identity()
    finally:
        engine.close()


def run(args: argparse.Namespace, engines: Engines) -> int:
    a, b = engines["a"], engines["b"]  # parsed: a bad engine string was a usage error before anything ran
    if args.name:
        runs.report_stem("parity", args.name, "--name")  # before anything runs, as the engine strings
    side_a, side_b = Side("", "any", 1), Side("", "any", 1)
    long_lengths = None
    title = f"parity: {args.name}" if args.name else "parity"
    if args.preset:
        preset = make_preset(load_recipe(args.recipe), args.preset)
        side_a, side_b = preset.a, preset.b
        long_lengths = list(LONG_LENGTHS) if preset.long_prompts else None
        title = f"parity, preset {preset.name}: {side_a.variant} vs {side_b.variant}"
    spec_a = args.spec_a or side_a.spec
    spec_b = args.spec_b or side_b.spec
    stem = args.name or (f"parity-{args.preset}" if args.preset else "parity")
    settings = settings_of(args.max_new_tokens, args.top_logprobs)
    prompts = resolve_prompts(
        PromptOptions(args.prompts, args.long, args.limit, args.tokenizer, args.vocab_size, args.seed),
        [a, b],
        long_lengths,
    )
    report_paths(args.out, stem)  # bitexact's in --out, or refused before the run (ownership.py)
    inflight_a, inflight_b = args.inflight_a or side_a.inflight, args.inflight_b or side_b.inflight
    same = same_engine(a, probe_identity(a), b, probe_identity(b))
    # One server asked two ways (8 requests in flight against 1) is a batching check, and worth running;
    # one server asked the same way twice is a repeat, which parity would call EQUAL as if it proved more.
    if same and inflight_a == inflight_b and not args.allow_same_engine:
        raise UsageError(
            f"A and B are the same engine ({args.a} and {args.b}: {same}), asked the same way: parity of "
            "an engine with itself proves nothing about the change under test; point B at the reference "
            "server, give --inflight-a/--inflight-b that differ (a batching check), or pass "
            "--allow-same-engine (then it is a repeat check, and the verdict says so)"
        )
    gens_a, ident_a = run_side(a, prompts, settings, args.out, "A", inflight_a, tokenizer=args.tokenizer)
    gens_b, ident_b = run_side(b, prompts, settings, args.out, "B", inflight_b, tokenizer=args.tokenizer)
    check_spec(gens_a, spec_a, f"A ({args.a})", "--spec-a")
    check_spec(gens_b, spec_b, f"B ({args.b})", "--spec-b")
    summary = comparison_summary(
        verb="parity",
        title=title,
        a={
            "engine": args.a,
            "variant": side_a.variant,
            "identity": ident_a,
            "spec": spec_summary(gens_a, spec_a),
        },
        b={
            "engine": args.b,
            "variant": side_b.variant,
            "identity": ident_b,
            "spec": spec_summary(gens_b, spec_b),
        },
        settings=settings.to_json(),
        gens_a=gens_a,
        gens_b=gens_b,
        tokenizer=report_tokenizer(args.tokenizer, [a, b]),
    )
    summary["reports"] = write_comparison(args.out, stem, summary)
    verdict = "EQUAL" if summary["differ"] == 0 else "DIFFERENT"
    if same:
        verdict += (
            f" (the same engine on both sides, {inflight_a} against {inflight_b} in flight: a batching check)"
            if inflight_a != inflight_b
            else " (the same engine on both sides: a repeat check, not parity)"
        )
        summary["same_engine"] = True
    emit(
        summary,
        args.json,
        f"parity: {verdict}: {summary['equal']}/{summary['prompts']} prompts equal "
        f"({summary['tokens_differ']} differ in token ids){not_argmax_text(summary)}; compared: "
        f"{compared_text(summary['compared_values'])}; report: {summary['reports'][1]}",
    )
    return 0 if summary["differ"] == 0 else 1
