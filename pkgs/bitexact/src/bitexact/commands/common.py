"""What the verbs share: validated options, prompts from options, running one side with stored results
keyed by the engine's identity, reports, and the verdict line."""

from __future__ import annotations

import argparse
import hashlib
import math
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bitexact import runs
from bitexact.argv import (
    MAX_PROMPTS,
    MAX_SEED,
    MAX_TOKENS,
    MAX_TOP_LOGPROBS,
    MAX_VOCAB,
    count,
    parse_lengths,
)
from bitexact.engines.base import Engine, Settings
from bitexact.engines.factory import open_engine
from bitexact.engines.spec import parse_engine
from bitexact.errors import UsageError
from bitexact.files import atomic_write_text, displayable, dumps
from bitexact.generation import Generation
from bitexact.longprompts import long_battery
from bitexact.ownership import take
from bitexact.prompts import (
    HFTokenizer,
    Prompt,
    Tokenizer,
    default_battery,
    load_prompts,
    load_tokenizer,
    tokenize_all,
    vocabulary_ids,
)
from bitexact.results import ResultStore
from bitexact.runner import run_battery

DEFAULT_MAX_NEW_TOKENS = 64
DEFAULT_TOP_LOGPROBS = 5
# Identity fields that describe where or how an engine was reached, not what it computes: they show in
# reports but key no results (the URL names the results file; the launch command repeats the port; a
# restart changes the start time, and a restarted server computes the same).
REPORT_ONLY = ("url", "launch_command", "started")
# The verb whose results a results file's tag names (runs.py keeps one command per verb in an --out).
TAG_VERBS = {"A": "parity", "B": "parity", "golden": "golden-record", "check": "golden-check"}


def _engine_tokenizer(engines: list[str]) -> Tokenizer | None:
    """A local hf: model's own tokenizer, when it has one."""
    for raw in engines:
        spec = parse_engine(raw)
        if spec.kind == "hf" and (Path(spec.target) / "tokenizer_config.json").exists():
            return HFTokenizer(spec.target, f"the tokenizer of {raw}")
    return None


def report_tokenizer(args: argparse.Namespace, engines: list[str]) -> Tokenizer | None:
    """The tokenizer that decodes text around divergences in reports: --tokenizer, else a local
    hf: model's own; None (no text shown) otherwise."""
    if getattr(args, "tokenizer", None):
        return load_tokenizer(args.tokenizer)
    return _engine_tokenizer(engines)


def resolve_prompts(
    args: argparse.Namespace, engines: list[str], long_lengths: list[int] | None = None
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


def slug(text: str) -> str:
    """A file-name-safe form of an engine string; the hash keeps long strings with a common prefix apart."""
    readable = re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_")[:60]
    return f"{readable}-{hashlib.sha256(text.encode()).hexdigest()[:8]}"


def identity_key(identity: dict[str, Any]) -> dict[str, Any]:
    """The part of an engine's identity that keys stored results."""
    return {k: v for k, v in identity.items() if k not in REPORT_ONLY}


def results_path(out: Path, tag: str, raw: str) -> Path:
    """Named by the engine string without transport options, so `?retries=5` finds the same file."""
    return out / f"{tag}-{slug(parse_engine(raw).canonical)}.jsonl"


def run_side(
    raw: str,
    prompts: list[Prompt],
    settings: Settings,
    out: Path,
    tag: str,
    inflight: int = 1,
    group: int | None = None,
    tokenizer: str | None = None,
    vet: Callable[[dict[str, Any]], None] | None = None,
    groups: list[list[Prompt]] | None = None,
    before_group: Callable[[Engine, list[Prompt]], None] | None = None,
) -> tuple[list[Generation], dict[str, Any]]:
    """Open the engine, run the prompts with results stored under `out`, close it. `vet` sees the engine's
    identity before any prompt runs and may refuse it (a golden of another model, say); `groups` and
    `before_group` (given the open engine) as run_battery takes them."""
    engine: Engine = open_engine(raw, inflight=inflight, tokenizer=tokenizer)
    if group is not None:
        engine.group_size = group
    try:
        identity = engine.identity()
        if vet is not None:
            vet(identity)
        store = keyed_store(out, tag, raw, identity, settings.to_json(), group=engine.group_size)
        hook = None if before_group is None else (lambda g: before_group(engine, g))
        vocabulary = vocabulary_ids(tokenizer) if tokenizer else None
        gens = run_battery(engine, prompts, settings, store, f"{tag} {raw}", groups, hook, vocabulary)
    finally:
        engine.close()
    return gens, identity


def keyed_store(
    out: Path, tag: str, raw: str, identity: dict[str, Any], settings: dict[str, Any], **extra: Any
) -> ResultStore:
    """The results file of `raw` under `out`, keyed by what the engine is (its identity, not the
    engine string) and what it was asked: rows of another build or other settings are set aside."""
    spec = parse_engine(raw)
    if spec.kind in ("sglang", "openai", "llamacpp") and not identity.get("version"):
        print(
            f"bitexact: {raw}: the server reports no version; stored results cannot be told from "
            "another build's on this address: use a fresh --out after changing the server",
            file=sys.stderr,
        )
    # The command that holds --out (runs.py) keys the rows too: they were made in its company (its
    # prompt list and grouping), and a file of another command's rows is never resumed from.
    key = {
        "engine": spec.canonical,
        "identity": identity_key(identity),
        "settings": settings,
        "command": runs.claimed_digest(out, TAG_VERBS.get(tag, tag)),
        **extra,
    }
    return ResultStore(take(results_path(out, tag, raw)), {**key, "tag": tag})


def report_paths(out: Path, stem: str) -> list[Path]:
    """A verb's two reports in --out, Markdown then HTML, taken as bitexact's (ownership.py: a file of the
    user's of that name is refused, never replaced)."""
    return [take(out / f"{stem}.md"), take(out / f"{stem}.html")]


def write_reports(out: Path, stem: str, markdown: str, html: str) -> list[str]:
    paths = report_paths(out, stem)
    atomic_write_text(paths[0], markdown)
    atomic_write_text(paths[1], html)
    return [str(p) for p in paths]


def emit(summary: dict[str, Any], as_json: bool, verdict: str) -> None:
    """`--json`: the summary; otherwise one line, the verdict (details are in the reports)."""
    if as_json:
        sys.stdout.write(dumps(finite_or_text(summary), indent=1, default=str))
        sys.stdout.write("\n")
    else:  # a path that is not UTF-8 in it is shown escaped (files.SHOWN), never an encoding error
        sys.stdout.write(displayable(verdict.replace("\n", " ")) + "\n")
    sys.stdout.flush()


def finite_or_text(value: Any) -> Any:
    """`value` with every non-finite float replaced by its text ("inf", "nan"): --json stays standard JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: finite_or_text(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite_or_text(v) for v in value]
    return value


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
