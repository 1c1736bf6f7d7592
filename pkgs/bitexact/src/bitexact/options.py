"""The options the verbs share (prompts, settings, --out), and what they resolve to: the prompts a run
sends, its settings, the tokenizer its reports decode with."""

from __future__ import annotations

import argparse
from pathlib import Path

from bitexact.argv import (
    MAX_PROMPTS,
    MAX_SEED,
    MAX_TOKENS,
    MAX_TOP_LOGPROBS,
    MAX_VOCAB,
    count,
    parse_lengths,
)
from bitexact.engines.base import Settings
from bitexact.engines.spec import EngineSpec
from bitexact.errors import UsageError
from bitexact.longprompts import long_battery
from bitexact.prompts import (
    HFTokenizer,
    Prompt,
    Tokenizer,
    default_battery,
    load_prompts,
    load_tokenizer,
    tokenize_all,
)

DEFAULT_MAX_NEW_TOKENS = 64
DEFAULT_TOP_LOGPROBS = 5


def _engine_tokenizer(engines: list[EngineSpec]) -> Tokenizer | None:
    """A local hf: model's own tokenizer, when it has one."""
    for spec in engines:
        if spec.kind == "hf" and (Path(spec.target) / "tokenizer_config.json").exists():
            return HFTokenizer(spec.target, f"the tokenizer of {spec.raw}")
    return None


def report_tokenizer(args: argparse.Namespace, engines: list[EngineSpec]) -> Tokenizer | None:
    """The tokenizer that decodes text around divergences in reports: --tokenizer, else a local
    hf: model's own; None (no text shown) otherwise."""
    if getattr(args, "tokenizer", None):
        return load_tokenizer(args.tokenizer)
    return _engine_tokenizer(engines)


def resolve_prompts(
    args: argparse.Namespace, engines: list[EngineSpec], long_lengths: list[int] | None = None
) -> list[Prompt]:
    tokenizer = load_tokenizer(args.tokenizer) if args.tokenizer else None
    lengths = parse_lengths(args.long, MAX_TOKENS) if getattr(args, "long", None) else long_lengths
    if args.prompts and lengths:
        raise UsageError("give either --prompts or --long, not both")
    if not lengths and not getattr(args, "shared_prefix", None):
        # they shape generated prompts only; without any they would change nothing, silently
        given = {"--vocab-size": args.vocab_size is not None, "--seed": args.seed != 0}
        unused = [flag for flag, present in given.items() if present]
        if unused:
            raise UsageError(
                f"{' and '.join(unused)} shape generated long prompts (--long) only, and this run reads "
                f"{'--prompts' if args.prompts else 'the shipped battery'}: give --long, or leave "
                f"{'them' if len(unused) > 1 else 'it'} out"
            )
    if lengths:
        if tokenizer is None:
            tokenizer = _engine_tokenizer(engines)
        prompts = long_battery(lengths, seed=args.seed, tokenizer=tokenizer, vocab_size=args.vocab_size)
        return prompts[: args.limit] if args.limit else prompts
    prompts = load_prompts(args.prompts) if args.prompts else default_battery()
    if args.limit:
        prompts = prompts[: args.limit]
    if tokenizer is None and any(p.input_ids is None for p in prompts):
        tokenizer = _engine_tokenizer(engines)
    return tokenize_all(prompts, tokenizer)


def settings_of(args: argparse.Namespace) -> Settings:
    new = DEFAULT_MAX_NEW_TOKENS if args.max_new_tokens is None else args.max_new_tokens
    top = DEFAULT_TOP_LOGPROBS if args.top_logprobs is None else args.top_logprobs
    if top < 2:
        raise UsageError("--top-logprobs must be 2 or more (the top-1/top-2 margin needs two)")
    return Settings(max_new_tokens=new, top_logprobs=top)


def add_prompt_options(p: argparse.ArgumentParser, force: str | None = None) -> None:
    p.add_argument(
        "--prompts",
        help="JSONL prompts ({'id', 'input_ids'} or {'id', 'text'}); default: the shipped battery",
    )
    p.add_argument(
        "--long", help="long prompts instead, comma-separated lengths in tokens (e.g. 16k,64k,128k)"
    )
    p.add_argument("--limit", type=count(1, MAX_PROMPTS), help="use only the first N prompts")
    p.add_argument(
        "--tokenizer",
        help="a local tokenizer folder, or 'bytes': tokenizes text prompts on the client and decodes the "
        "text around divergences in reports",
    )
    p.add_argument(
        "--vocab-size",
        type=count(2, MAX_VOCAB),
        help="long prompts without a tokenizer: draw ids below this",
    )
    p.add_argument("--seed", type=count(0, MAX_SEED), default=0, help="seed of the long-prompt generator")
    p.add_argument(
        "--max-new-tokens",
        type=count(1, MAX_TOKENS),
        help=f"tokens generated per prompt (default: {DEFAULT_MAX_NEW_TOKENS})",
    )
    p.add_argument(
        "--top-logprobs",
        type=count(2, MAX_TOP_LOGPROBS),
        help=f"alternatives per position (default: {DEFAULT_TOP_LOGPROBS})",
    )
    add_out_options(p, "results (JSONL, resumable) and reports", force or FORCE_HELP)


FORCE_HELP = (
    "start over in an --out that holds another command's run (the files bitexact's manifest there lists "
    "are moved aside into OUT/replaced/, never deleted; files of yours stay, whatever their names)"
)


def add_out_options(p: argparse.ArgumentParser, contents: str, force: str = FORCE_HELP) -> None:
    """--out (one command's folder: runs.py), --force and --json, as every verb takes them."""
    p.add_argument(
        "--out",
        type=Path,
        help=f"{contents} (default: bitexact-out/VERB-DIGEST, a folder of this command's own)",
    )
    p.add_argument("--force", action="store_true", help=force)
    p.add_argument("--json", action="store_true", help="print a machine-readable summary on stdout")
