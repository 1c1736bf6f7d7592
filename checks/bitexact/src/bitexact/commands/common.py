"""What the verbs share: prompts from options, output paths, running one side with stored results."""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from pathlib import Path
from typing import Any

from bitexact.engines.base import Engine, Settings
from bitexact.engines.factory import open_engine
from bitexact.engines.spec import parse_engine
from bitexact.errors import UsageError
from bitexact.generation import Generation
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
from bitexact.results import ResultStore
from bitexact.runner import run_battery


def parse_lengths(text: str) -> list[int]:
    out = []
    for part in text.split(","):
        part = part.strip().lower()
        scale = 1024 if part.endswith("k") else 1
        try:
            out.append(int(float(part.rstrip("k")) * scale))
        except ValueError:
            raise UsageError(f"lengths {text!r}: use numbers like 640,2200,128k") from None
    return out


def _engine_tokenizer(engines: list[str]) -> Tokenizer | None:
    """A local hf: model's own tokenizer, when it has one."""
    for raw in engines:
        spec = parse_engine(raw)
        if spec.kind == "hf" and (Path(spec.target) / "tokenizer_config.json").exists():
            return HFTokenizer(spec.target)
    return None


def resolve_prompts(
    args: argparse.Namespace, engines: list[str], long_lengths: list[int] | None = None
) -> list[Prompt]:
    tokenizer = load_tokenizer(args.tokenizer) if args.tokenizer else None
    lengths = parse_lengths(args.long) if getattr(args, "long", None) else long_lengths
    if args.prompts and lengths:
        raise UsageError("give either --prompts or --long, not both")
    if lengths:
        if tokenizer is None:
            tokenizer = _engine_tokenizer(engines)
        return long_battery(lengths, seed=args.seed, tokenizer=tokenizer, vocab_size=args.vocab_size)
    prompts = load_prompts(args.prompts) if args.prompts else default_battery()
    if getattr(args, "limit", None):
        prompts = prompts[: args.limit]
    if tokenizer is None and any(p.input_ids is None for p in prompts):
        tokenizer = _engine_tokenizer(engines)
    return tokenize_all(prompts, tokenizer)


def settings_of(args: argparse.Namespace) -> Settings:
    if args.max_new_tokens < 1:
        raise UsageError("--max-new-tokens must be >= 1")
    if args.top_logprobs < 2:
        raise UsageError("--top-logprobs must be >= 2 (the top-1/top-2 margin needs two)")
    return Settings(max_new_tokens=args.max_new_tokens, top_logprobs=args.top_logprobs)


def slug(text: str) -> str:
    """A file-name-safe form of an engine string; the hash keeps long strings with a common prefix apart."""
    readable = re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_")[:60]
    return f"{readable}-{hashlib.sha256(text.encode()).hexdigest()[:8]}"


def run_side(
    raw: str,
    prompts: list[Prompt],
    settings: Settings,
    out: Path,
    tag: str,
    inflight: int = 1,
    group: int | None = None,
    tokenizer: str | None = None,
) -> tuple[list[Generation], dict[str, Any]]:
    """Open the engine, run the prompts with results stored under `out`, close it."""
    engine: Engine = open_engine(raw, inflight=inflight, tokenizer=tokenizer)
    if group is not None:
        engine.group_size = group
    try:
        identity = engine.identity()
        key = {"engine": raw, "settings": settings.to_json(), "group": engine.group_size, "tag": tag}
        store = ResultStore(out / f"{tag}-{slug(raw)}.jsonl", key)
        gens = run_battery(engine, prompts, settings, store, f"{tag} {raw}")
    finally:
        engine.close()
    return gens, identity


def emit(summary: dict[str, Any], as_json: bool, human: str) -> None:
    if as_json:
        json.dump(summary, sys.stdout, indent=1, default=str)
        sys.stdout.write("\n")
    else:
        sys.stderr.write(human + "\n")


def add_prompt_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--prompts",
        help="JSONL prompts ({'id', 'input_ids'} or {'id', 'text'}); default: the shipped battery",
    )
    p.add_argument(
        "--long", help="long prompts instead, comma-separated lengths in tokens (e.g. 16k,64k,128k)"
    )
    p.add_argument("--limit", type=int, help="use only the first N prompts")
    p.add_argument(
        "--tokenizer", help="tokenize text prompts on the client: a local tokenizer folder, or 'bytes'"
    )
    p.add_argument("--vocab-size", type=int, help="long prompts without a tokenizer: draw ids below this")
    p.add_argument("--seed", type=int, default=0, help="seed of the long-prompt generator")
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--top-logprobs", type=int, default=5)
    p.add_argument(
        "--out", type=Path, default=Path("bitexact-out"), help="results (JSONL, resumable) and reports"
    )
    p.add_argument("--json", action="store_true", help="print a machine-readable summary on stdout")
