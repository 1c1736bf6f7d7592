"""The options the verbs share (prompts, settings, --out), and what they resolve to: the prompts a run
sends, its settings, the tokenizer its reports decode with."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
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


@dataclass(frozen=True)
class PromptOptions:
    """What the prompt options (add_prompt_options) ask for, as the verb read them from its command line:
    a prompt file, generated long prompts, or the shipped battery, and how to tokenize them."""

    prompts: str | None = None
    long: str | None = None
    limit: int | None = None
    tokenizer: str | None = None
    vocab_size: int | None = None
    seed: int = 0
    shared_prefix: int | None = None  # warm's --shared-prefix: it shapes generated prompts too


def report_tokenizer(tokenizer: str | None, engines: list[EngineSpec]) -> Tokenizer | None:
    """The tokenizer that decodes text around divergences in reports: --tokenizer, else a local
    hf: model's own; None (no text shown) otherwise."""
    if tokenizer:
        return load_tokenizer(tokenizer)
    return _engine_tokenizer(engines)


def resolve_prompts(
    asked: PromptOptions, engines: list[EngineSpec], long_lengths: list[int] | None = None
) -> list[Prompt]:
    tokenizer = load_tokenizer(asked.tokenizer) if asked.tokenizer else None
    lengths = parse_lengths(asked.long, MAX_TOKENS) if asked.long else long_lengths
    if asked.prompts and lengths:
        raise UsageError("give either --prompts or --long, not both")
    if not lengths and not asked.shared_prefix:
        # they shape generated prompts only; without any they would change nothing, silently
        given = {"--vocab-size": asked.vocab_size is not None, "--seed": asked.seed != 0}
        unused = [flag for flag, present in given.items() if present]
        if unused:
            raise UsageError(
                f"{' and '.join(unused)} shape generated long prompts (--long) only, and this run reads "
                f"{'--prompts' if asked.prompts else 'the shipped battery'}: give --long, or leave "
                f"{'them' if len(unused) > 1 else 'it'} out"
            )
    if lengths:
        if tokenizer is None:
            tokenizer = _engine_tokenizer(engines)
        prompts = long_battery(lengths, seed=asked.seed, tokenizer=tokenizer, vocab_size=asked.vocab_size)
        return prompts[: asked.limit] if asked.limit else prompts
    prompts = load_prompts(asked.prompts) if asked.prompts else default_battery()
    if asked.limit:
        prompts = prompts[: asked.limit]
    if tokenizer is None and any(p.input_ids is None for p in prompts):
        tokenizer = _engine_tokenizer(engines)
    return tokenize_all(prompts, tokenizer)


def settings_of(max_new_tokens: int | None, top_logprobs: int | None) -> Settings:
    """--max-new-tokens and --top-logprobs as given, else their defaults."""
    new = DEFAULT_MAX_NEW_TOKENS if max_new_tokens is None else max_new_tokens
    top = DEFAULT_TOP_LOGPROBS if top_logprobs is None else top_logprobs
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
