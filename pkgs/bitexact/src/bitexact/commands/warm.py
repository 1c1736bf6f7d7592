"""`bitexact warm ENGINE`: the same prompts computed afresh (the cache flushed before each) and taken from
the server's prefix cache, compared bit for bit. A warm pass counts only where the server reports cache
hits for every prompt; a cold pass only where it reports none. The passes: warmplan.py. With
--min-prompt-tokens, prompts shorter than that (their ids, else the server's count in the cold pass) are
sent but left out of every comparison and refusal, and listed as left out."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bitexact.argv import MAX_IN_FLIGHT, MAX_REPEATS, MAX_TOKENS, count, parse_lengths
from bitexact.engines.base import Settings
from bitexact.engines.spec import EngineSpec
from bitexact.errors import BitexactError, UsageError
from bitexact.files import atomic_write_text
from bitexact.generation import Generation
from bitexact.goldenselect import (
    GoldenRequest,
    Selected,
    select_golden,
)
from bitexact.helptext import verb_parser
from bitexact.longprompts import long_prompt
from bitexact.names import name_option
from bitexact.options import (
    PromptOptions,
    add_prompt_options,
    report_tokenizer,
    resolve_prompts,
    settings_of,
)
from bitexact.output import emit, write_comparison
from bitexact.ownership import take
from bitexact.prefixcache import FLUSH_PATHS, CacheFlush, cached_tokens, prompt_tokens
from bitexact.presets import load_recipe, variant_side
from bitexact.prompts import Prompt, load_tokenizer
from bitexact.report.fmt import compared_text, text
from bitexact.report.markdown import verdict_word
from bitexact.report.warm import warm_markdown
from bitexact.results import ResultStore
from bitexact.runs import Engines
from bitexact.sides import results_path, run_side
from bitexact.speccheck import REQUIREMENTS, check_spec, spec_summary
from bitexact.summary import compared, comparison_summary
from bitexact.warmplan import COLD, CacheSetup, WarmPlan, alignment, plain_plan, shared_plan

EXAMPLES = """examples:
  bitexact warm sglang+http://127.0.0.1:30000 --warm-passes 2
  bitexact warm sglang+http://127.0.0.1:30000 --min-prompt-tokens 65
  bitexact warm sglang+http://127.0.0.1:30000 --shared-prefix 1237 --tokenizer ./model --inflight 8
  bitexact warm openai+http://127.0.0.1:8000/v1?model=qwen --prompts my.jsonl
  bitexact warm sglang+http://127.0.0.1:30000 --recipe nix/recipes/qwen3.8-27b-exact.json \\
      --variant radix --golden-dir checks/golden"""
HOW_TO_REPORT = (
    "SGLang's native API reports meta_info.cached_tokens always (is --disable-radix-cache off?); "
    "OpenAI-compatible servers report usage.prompt_tokens_details.cached_tokens only when told to "
    "(vLLM: --enable-prefix-caching --enable-prompt-tokens-details; SGLang: --enable-cache-report)"
)
# Measured, not read from a source: SGLang 0.5.20's cache for a hybrid GDN model (mamba radix cache,
# extra_buffer) on an H200, 2026-12-02, hit in whole 64-token units, floor((L-1)/64)*64 of L tokens.
MATCH_UNIT_SEEN = "SGLang's hybrid GDN cache matched in 64-token units on an H200, 2026-12-02"


class WarmRefused(BitexactError):
    """A pass that cannot count: a warm one without cache hits, a cold one with them (exit 2)."""


def prefix_tokens(value: str) -> int:
    """An argparse type: one length in tokens (1237, 64k), bounded as every length is (argv.py)."""
    try:
        lengths = parse_lengths(value, MAX_TOKENS)
    except UsageError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    if len(lengths) != 1:
        raise argparse.ArgumentTypeError(f"{value!r}: one length, e.g. 1237 or 64k")
    return lengths[0]


def add_parser(sub: Any) -> None:
    p = verb_parser(
        sub,
        "warm",
        help="cold against warm: answers from the prefix cache equal those computed afresh",
        epilog=EXAMPLES,
    )
    p.add_argument(
        "engine", help="the server: sglang+http://HOST:PORT or openai+http://HOST:PORT/v1?model=NAME"
    )
    p.add_argument(
        "--warm-passes",
        type=count(1, MAX_REPEATS),
        default=1,
        help="passes after the cold one (each prompt once each)",
    )
    p.add_argument(
        "--shared-prefix",
        type=prefix_tokens,
        help="instead: every prompt is one prefix of this many tokens (e.g. 1237, odd so that no page, "
        "chunk or split size divides it; 64k) followed by the prompt as its question; the warm passes "
        "cache the prefix alone and extend it. Needs --tokenizer or --vocab-size",
    )
    p.add_argument(
        "--inflight",
        type=count(1, MAX_IN_FLIGHT),
        default=1,
        help="requests in flight in the warm passes (the cold pass sends one at a time, each after a flush)",
    )
    p.add_argument(
        "--min-prompt-tokens",
        type=count(1, MAX_TOKENS),
        metavar="N",
        help="leave prompts shorter than N tokens (their token ids, else the server's count in the cold "
        "pass) out of every comparison and hit check; they are still sent, and listed as left out. A "
        "prompt no longer than the cache's match unit cannot come from it (SGLang's hybrid GDN cache: "
        "64, so 65)",
    )
    p.add_argument(
        "--spec", choices=REQUIREMENTS, help="must the engine speculate? (default: the --variant's, else any)"
    )
    p.add_argument("--recipe", help="recipe JSON: the --variant's speculation requirement, the golden's key")
    p.add_argument(
        "--variant",
        type=name_option,
        default="recipe",
        help="the recipe variant the server runs (with --recipe)",
    )
    p.add_argument(
        "--golden",
        type=Path,
        help="compare every pass, the cold one too, with this golden record instead of the cold pass",
    )
    p.add_argument(
        "--golden-dir",
        type=Path,
        help="likewise with this card's golden of the recipe in DIR (DIR/<card>/<recipe>[-long].json)",
    )
    p.add_argument(
        "--recipe-name", type=name_option, help="key the golden by this name instead of the recipe file's"
    )
    p.add_argument(
        "--card", type=name_option, help="the card's slug, for a golden (default: this machine's GPU)"
    )
    add_prompt_options(p)
    p.set_defaults(run=run, allow_identity_mismatch=False)


def _requirement(args: argparse.Namespace) -> str:
    if args.spec:
        return str(args.spec)
    if args.recipe:
        return variant_side(load_recipe(args.recipe), args.variant).spec
    return "any"


def _shared_plan(args: argparse.Namespace, questions: list[Prompt]) -> WarmPlan:
    if args.tokenizer is None and args.vocab_size is None:
        raise UsageError(
            f"--shared-prefix {args.shared_prefix}: the prefix is made as token ids, so that its length is "
            "exact: give --tokenizer (the served model's tokenizer folder, or bytes) or --vocab-size N"
        )
    textual = [q.id for q in questions if q.input_ids is None]
    if textual:
        raise UsageError(
            f"--shared-prefix: prompts {textual[:3]} are text; the questions follow the prefix as token "
            "ids: give --tokenizer to tokenize them, or --prompts with input_ids"
        )
    tokenizer = load_tokenizer(args.tokenizer) if args.tokenizer else None
    prefix = long_prompt(
        args.shared_prefix,
        seed=args.seed,
        tokenizer=tokenizer,
        vocab_size=args.vocab_size,
        prompt_id="shared-prefix",
    )
    return shared_plan(questions, prefix, args.warm_passes, args.inflight)


def _vet(spec: EngineSpec, golden: Selected | None) -> Any:
    golden_vet = golden.vet(spec.raw, False) if golden is not None else None

    def vet(identity: dict[str, Any]) -> None:
        if identity.get("disable_radix_cache") is True:
            raise WarmRefused(
                f"{spec.raw} runs with --disable-radix-cache (its /server_info says so): no answer can come "
                "from its cache, so no warm pass could count; start it without the flag (the recipe's "
                "`radix` variant)"
            )
        if golden_vet is not None:
            golden_vet(identity)

    return vet


def _by_pass(plan: WarmPlan, gens: list[Generation]) -> dict[str, list[Generation]]:
    by_pass: dict[str, list[Generation]] = {name: [] for name in plan.passes}
    for copy, gen in zip(plan.copies, gens, strict=True):
        by_pass[copy.id.rsplit("#", 1)[1]].append(gen)
    return by_pass


def _span(counts: list[int]) -> str:
    low, high = min(counts), max(counts)
    return f"{low}" if low == high else f"{low} to {high}"


def _short_hint(missing: list[int | None], hits: list[int | None]) -> str:
    """Why a warm pass's prompts without hits got none, where they are its shortest: each no longer than
    the smallest hit of the pass, so no whole match unit of the cache fits in them."""
    smallest = min((h for h in hits if h), default=None)
    if smallest is None or not missing or any(n is None or n > smallest for n in missing):
        return ""
    lengths = [n for n in missing if n is not None]
    return (
        f"; these are the shortest prompts ({_span(lengths)} prompt tokens; the smallest hit in this pass "
        f"was {smallest} tokens): a prompt no longer than the cache's match unit cannot be served from it "
        f"({MATCH_UNIT_SEEN}); leave such prompts out with --min-prompt-tokens {smallest + 1}"
    )


def _refusals(
    by_pass: dict[str, list[Generation]], ids: list[str], counts: list[int | None], flush: CacheFlush
) -> list[str]:
    """Why the passes cannot count, over the prompts compared (`counts`: their prompt tokens)."""
    out = []
    cold_hits = [(i, cached_tokens(g)) for i, g in zip(ids, by_pass[COLD], strict=True)]
    hit = [f"{i} ({n} tokens)" for i, n in cold_hits if n]
    if hit:
        why = f"the flush failed: {'; '.join(flush.errors)}" if flush.errors else "the flush did not empty it"
        out.append(
            f"the cold pass took prompt tokens from the cache for {len(hit)}/{len(ids)} prompts, e.g. "
            f"{', '.join(hit[:3])}: they were not computed afresh ({why}); let the client flush the cache "
            "(SGLang: /flush_cache, with the admin key if one is set; vLLM: VLLM_SERVER_DEV_MODE=1) or "
            "start a fresh server"
        )
    for name, gens in by_pass.items():
        if name == COLD:
            continue
        hits = [cached_tokens(g) for g in gens]
        missing = [(i, n, h) for i, n, h in zip(ids, counts, hits, strict=True) if not h]
        if missing:
            shown = ", ".join(f"{i} ({text(h)})" for i, _, h in missing[:3])
            out.append(
                f"pass {name} shows no cache hits for {len(missing)}/{len(ids)} prompts (cached tokens "
                f"reported: {shown})" + _short_hint([n for _, n, _ in missing], hits)
            )
    if len(out) > bool(hit):
        out.append(
            f"an answer without hits was computed afresh: it proves nothing of the cache; {HOW_TO_REPORT}; "
            "a resumed run whose server restarted meanwhile needs a fresh --out"
        )
    return out


def _withdraw(args: argparse.Namespace, spec: EngineSpec, by_pass: dict[str, list[Generation]]) -> str:
    """Take the stored answers a refusal rests on out of the results, so that a rerun asks them again
    instead of resuming them and refusing again: cold answers that show cache hits, warm answers that
    show none. The words the refusal adds, or "" where none were stored."""
    resting = {g.prompt_id for g in by_pass[COLD] if cached_tokens(g)}
    resting |= {
        g.prompt_id for name, gens in by_pass.items() if name != COLD for g in gens if not cached_tokens(g)
    }
    # The rows are those of run_side's store for this engine (the key is not needed to take rows out).
    store = ResultStore(results_path(args.out, "warm", spec), {})
    taken = store.withdraw(resting, "the warm refusal rests on them")
    return (
        f"; the {taken} stored answers it rests on are withdrawn, and a rerun asks them again"
        if taken
        else ""
    )


def _prompt_tokens(prompt: Prompt, gen: Generation) -> int | None:
    return len(prompt.input_ids) if prompt.input_ids is not None else prompt_tokens(gen)


def _kept(minimum: int | None, prompts: list[Prompt], counts: list[int | None]) -> list[int]:
    """The indices of the prompts compared: all, or those of `minimum` prompt tokens or more."""
    if minimum is None:
        return list(range(len(prompts)))
    unknown = [p.id for p, n in zip(prompts, counts, strict=True) if n is None]
    if unknown:
        raise WarmRefused(
            f"warm: --min-prompt-tokens {minimum}: the server reported no prompt token count for "
            f"{len(unknown)}/{len(prompts)} prompts in the cold pass (e.g. {', '.join(unknown[:3])}; SGLang: "
            "meta_info.prompt_tokens, OpenAI API: usage.prompt_tokens), so whether they are shorter is not "
            "known; give the prompts as token ids (--tokenizer, or --prompts with input_ids) or leave "
            "--min-prompt-tokens out"
        )
    kept = [k for k, n in enumerate(counts) if n is not None and n >= minimum]
    if not kept:
        longest = max(n for n in counts if n is not None)
        raise UsageError(
            f"warm: --min-prompt-tokens {minimum} leaves no prompt to compare: the longest of the "
            f"{len(prompts)} has {longest} prompt tokens; give {longest} or less, or longer prompts"
        )
    return kept


@dataclass(frozen=True)
class Reference:
    """What every compared pass must equal: the cold pass, or a golden record (then the cold pass too)."""

    gens: list[Generation]
    label: str
    side: dict[str, Any]  # how the report names it
    cold_compared: bool


def _pass_row(
    args: argparse.Namespace,
    name: str,
    gens: list[Generation],
    ids: list[str],
    ref: Reference,
    shared: dict[str, Any],
) -> tuple[dict[str, Any], list[str]]:
    """One pass: its cache hits and, where compared, its comparison and reports."""
    hits = [cached_tokens(g) for g in gens]
    row: dict[str, Any] = {
        "name": name,
        "inflight": 1 if name == COLD else args.inflight,
        "compared_with": None,
        "equal": None,
        "differ": 0,
        "tokens_differ": None,
        "hits_min": min((h or 0 for h in hits), default=None),
        "hits_max": max((h or 0 for h in hits), default=None),
        "without_hits": [] if name == COLD else [i for i, h in zip(ids, hits, strict=True) if not h],
    }
    if name == COLD and not ref.cold_compared:
        return row, []
    result = comparison_summary(
        verb="warm",
        title=f"warm: pass {name} of {args.engine} vs the {ref.label}",
        a={
            "engine": args.engine,
            "variant": f"{name} pass",
            "identity": shared["identity"],
            "spec": spec_summary(gens, shared["requirement"]),
        },
        b=ref.side,
        settings=shared["settings"],
        gens_a=gens,
        gens_b=ref.gens,
        tokenizer=shared["tokenizer"],
    )
    reports = write_comparison(args.out, f"warm-{name}", result)
    row.update(
        compared_with=ref.label,
        equal=result["equal"],
        differ=result["differ"],
        tokens_differ=result["tokens_differ"],
        report=reports[1],
        comparisons=result["comparisons"],
    )
    return row, reports


def _request(args: argparse.Namespace, engine: EngineSpec) -> GoldenRequest:
    """What this run asks, read once from its command line: the prompts and settings, and the golden it
    compares with (where --golden or --golden-dir names one)."""
    asked = PromptOptions(
        args.prompts, args.long, args.limit, args.tokenizer, args.vocab_size, args.seed, args.shared_prefix
    )
    return GoldenRequest(
        engine=engine,
        card=args.card,
        recipe=args.recipe,
        recipe_name=args.recipe_name,
        variant=args.variant,
        spec=args.spec,
        golden_dir=args.golden_dir,
        golden=args.golden,
        prompts=asked,
        max_new_tokens=args.max_new_tokens,
        top_logprobs=args.top_logprobs,
    )


def _inputs(
    args: argparse.Namespace, spec: EngineSpec
) -> tuple[list[Prompt], Settings, str, Selected | None]:
    """(prompts, settings, speculation requirement, golden): a golden's own, or from the options."""
    request = _request(args, spec)
    if request.golden is None and request.golden_dir is None:
        settings = settings_of(request.max_new_tokens, request.top_logprobs)
        return resolve_prompts(request.prompts, [spec]), settings, _requirement(args), None
    if args.shared_prefix:
        raise UsageError(
            "--shared-prefix with a golden: the golden holds the prompts as recorded, without a prefix; "
            "drop one of them"
        )
    golden = select_golden(request)
    return golden.prompts, golden.settings, golden.spec, golden


def _left_out_text(summary: dict[str, Any]) -> str:
    """The verdict line's word on prompts left out, and why."""
    if not summary["left_out"]:
        return ""
    names = ", ".join(f"{p['prompt_id']} ({p['prompt_tokens']})" for p in summary["left_out"][:3])
    more = ", ..." if len(summary["left_out"]) > 3 else ""
    return (
        f"; {len(summary['left_out'])} of {summary['prompts_sent']} prompts left out, shorter than "
        f"--min-prompt-tokens {summary['min_prompt_tokens']}: {names}{more}"
    )


def run(args: argparse.Namespace, engines: Engines) -> int:
    spec = engines["engine"]
    if spec.kind not in FLUSH_PATHS:
        raise UsageError(
            f"engine {args.engine!r}: warm runs need a server with a prefix cache that reports its hits: "
            "sglang+http://HOST:PORT or openai+http://HOST:PORT/v1?model=NAME"
        )
    prompts, settings, requirement, golden = _inputs(args, spec)
    markdown = take(args.out / "warm.md")  # bitexact's in --out, or refused before the run (ownership.py)
    if args.shared_prefix:
        plan = _shared_plan(args, prompts)
    else:
        plan = plain_plan(prompts, args.warm_passes, args.inflight)
    flush = CacheFlush(spec)
    setup = CacheSetup(plan, flush, settings, f"warm {args.engine}")
    gens, identity = run_side(
        spec,
        plan.copies,
        settings,
        args.out,
        "warm",
        args.inflight,
        tokenizer=args.tokenizer,
        vet=_vet(spec, golden),
        groups=[g.prompts for g in plan.groups],
        before_group=setup.before,
    )
    check_spec(gens, requirement, args.engine)
    sent = _by_pass(plan, gens)
    counts = [_prompt_tokens(p, g) for p, g in zip(plan.prompts, sent[COLD], strict=True)]
    # Left out after the run: short prompts are still sent (a golden's prompt set stays whole).
    kept = _kept(args.min_prompt_tokens, plan.prompts, counts)
    by_pass = {name: [pass_gens[k] for k in kept] for name, pass_gens in sent.items()}
    compared_prompts = [plan.prompts[k] for k in kept]
    ids = [p.id for p in compared_prompts]
    dropped = set(range(len(plan.prompts))) - set(kept)
    left_out = [{"prompt_id": plan.prompts[k].id, "prompt_tokens": counts[k]} for k in sorted(dropped)]
    if golden is not None:
        label = f"golden {golden.golden.path}"
        side = {"engine": label, "variant": golden.golden.record.get("variant")}
        # the golden's answers of the prompts kept, by id, in the plan's order (the golden's own)
        kept_ids = set(ids)
        expected = [g for p, g in zip(golden.prompts, golden.expected, strict=True) if p.id in kept_ids]
        ref = Reference(expected, label, side, cold_compared=True)
    else:
        side = {"engine": args.engine, "variant": "cold pass", "identity": identity}
        ref = Reference(by_pass[COLD], "cold pass", side, cold_compared=False)
    shared = {
        "identity": identity,
        "requirement": requirement,
        "settings": settings.to_json(),
        "tokenizer": report_tokenizer(args.tokenizer, [spec]),
    }
    passes, reports = [], []
    for name, pass_gens in by_pass.items():
        row, written = _pass_row(args, name, pass_gens, ids, ref, shared)
        passes.append(row)
        reports += written
    done = [p for p in passes if p["equal"] is not None]
    summary: dict[str, Any] = {
        "verb": "warm",
        "title": f"warm: {args.engine}, cold against its prefix cache",
        "engine": args.engine,
        "identity": identity,
        "mode": "shared-prefix" if plan.prefix else "plain",
        "reference": ref.label,
        "settings": settings.to_json(),
        "spec": spec_summary(gens, requirement),
        "prefix_tokens": args.shared_prefix,
        "prefix_alignment": alignment(args.shared_prefix) if args.shared_prefix else None,
        "flush": flush.to_json(),
        "primes": setup.primes,
        "prompts": len(ids),  # compared; prompts_sent less those left out
        "prompts_sent": len(plan.prompts),
        "min_prompt_tokens": args.min_prompt_tokens,
        "left_out": left_out,
        "compared": len(done) * len(ids),
        # what the verdict is over: every compared answer passed the answer check (answers.py)
        "compared_values": compared(
            [c for p in done for c in p["comparisons"]], settings.to_json(), unit="answer"
        ),
        "equal": sum(p["equal"] for p in done),
        "differ": sum(p["differ"] for p in done),
        "warm_hits_min": min(p["hits_min"] for p in passes if p["name"] != COLD),
        "passes": passes,
        "hits": [
            {
                "prompt_id": prompt.id,
                "prompt_tokens": counts[kept[k]],
                **{name: cached_tokens(by_pass[name][k]) for name in by_pass},
            }
            for k, prompt in enumerate(compared_prompts)
        ],
        "refused": _refusals(by_pass, ids, [counts[k] for k in kept], flush),
    }
    markdown = args.out / "warm.md"  # taken before the run
    atomic_write_text(markdown, warm_markdown(summary))
    summary["reports"] = [str(markdown), *reports]
    if summary["refused"]:
        withdrawn = _withdraw(args, spec, by_pass)
        raise WarmRefused(f"warm: refused: {' | '.join(summary['refused'])} (report: {markdown}){withdrawn}")
    emit(
        summary,
        args.json,
        f"warm: {verdict_word(summary['differ'] == 0)}: {summary['equal']}/{summary['compared']} answers "
        f"equal to the {ref.label} (passes {', '.join(p['name'] for p in done)} of {len(ids)} "
        f"prompts); every warm answer took {summary['warm_hits_min']} or more prompt tokens from the "
        f"cache{_left_out_text(summary)}; compared: {compared_text(summary['compared_values'])}; "
        f"report: {markdown}",
    )
    return 0 if summary["differ"] == 0 else 1
