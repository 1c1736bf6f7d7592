"""Golden records: values (token ids, logprobs, top-k per position) and their digests, keyed by card slug
and recipe, stored at `<golden dir>/<card slug>/<recipe>.json`."""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path
from typing import Any

from bitexact.errors import BitexactError, GoldenError
from bitexact.files import atomic_write_text, dumps
from bitexact.generation import Generation
from bitexact.prompts import Prompt, parse_prompt

# 2: the record digest covers the whole record (settings, prompts, key, metadata), not the values only.
SCHEMA = 2
KIND = "bitexact-golden"
RECORD_COMMAND = "nix run .#record-golden"


def _sha(chunks: list[bytes]) -> str:
    h = hashlib.sha256()
    for chunk in chunks:
        h.update(chunk)
    return h.hexdigest()


def digests(gen: Generation) -> dict[str, str]:
    """Digests over exact bytes: ids as int64, logprobs as IEEE-754 doubles, top-k as (key, double)."""
    top: list[bytes] = []
    for row in gen.top_logprobs:
        top.append(struct.pack("<q", len(row)))
        for key, lp in row:
            top.append(json.dumps(key).encode() + struct.pack("<d", lp))
    return {
        "token_ids": _sha([struct.pack("<q", t) for t in gen.token_ids]),
        "logprobs": _sha([struct.pack("<d", x) for x in gen.logprobs]),
        "top_logprobs": _sha(top),
    }


def golden_path(golden_dir: Path, card: str, recipe: str) -> Path:
    return golden_dir / card / f"{recipe}.json"


def record_digest(record: dict[str, Any]) -> str:
    """Over everything in the record but the digest itself: the values, the prompts as sent, the settings,
    the card, recipe and variant, and the metadata. An edit to any of them is caught on load, so a check
    never blames the server for a changed `max_new_tokens` or prompt."""
    body = {key: value for key, value in record.items() if key != "digest"}
    return _sha([dumps(body, sort_keys=True, separators=(",", ":")).encode()])


def build_record(
    *,
    card: str,
    recipe: str,
    variant: str,
    settings: dict[str, Any],
    metadata: dict[str, Any],
    prompts: list[Prompt],
    generations: list[Generation],
) -> dict[str, Any]:
    entries = []
    for prompt, gen in zip(prompts, generations, strict=True):
        entries.append(
            {
                "prompt": prompt.to_json(),
                "token_ids": gen.token_ids,
                "logprobs": gen.logprobs,
                "top_logprobs": [[[k, lp] for k, lp in row] for row in gen.top_logprobs],
                "digests": digests(gen),
            }
        )
    record = {
        "schema": SCHEMA,
        "kind": KIND,
        "card": card,
        "recipe": recipe,
        "variant": variant,
        "settings": settings,
        "metadata": metadata,
        "prompts": entries,
    }
    return {**record, "digest": record_digest(record)}


def write_record(record: dict[str, Any], path: Path) -> None:
    """Standard JSON through a temporary file and a rename (a full disk leaves the old file and no .tmp)."""
    atomic_write_text(path, dumps(record, indent=1) + "\n", option="--golden-dir/--golden")


def _refuse_constant(name: str) -> float:
    raise ValueError(f"non-standard JSON constant {name} (a logprob that is not a finite number)")


class Golden:
    def __init__(self, record: dict[str, Any], path: Path) -> None:
        self.record = record
        self.path = path
        self.prompts = [
            parse_prompt(e["prompt"], f"{path}: prompt {i}") for i, e in enumerate(record["prompts"])
        ]
        self.generations = [
            Generation.from_json({"prompt_id": p.id, **e})
            for p, e in zip(self.prompts, record["prompts"], strict=True)
        ]


def load_golden(path: Path, *, card: str, recipe: str | None) -> Golden:
    """Read and verify a golden record; every way it can be wrong is a GoldenError naming the fix."""
    if path.is_dir():
        raise GoldenError(
            f"--golden {path} is a directory; give the golden file (<dir>/<card>/<recipe>.json)"
        )
    if not path.is_file():
        raise GoldenError(
            f"no golden record for card {card!r} at {path}: the check cannot pass without one. Record it on "
            f"that card with `{RECORD_COMMAND}` (or `bitexact golden record ENGINE --card {card}`)."
        )
    try:
        record = json.loads(path.read_bytes().decode("utf-8"), parse_constant=_refuse_constant)
    except (json.JSONDecodeError, UnicodeDecodeError, ValueError) as exc:
        raise GoldenError(
            f"golden {path} is corrupted (not standard UTF-8 JSON: {exc}); "
            f"re-record it with `{RECORD_COMMAND}`"
        ) from None
    except OSError as exc:
        raise GoldenError(f"golden {path}: cannot read it: {exc.strerror}") from None
    if not isinstance(record, dict) or record.get("kind") != KIND:
        raise GoldenError(f"golden {path} is not a bitexact golden record")
    if record.get("schema") != SCHEMA:
        raise GoldenError(
            f"golden {path} has schema {record.get('schema')!r}; this bitexact reads schema {SCHEMA} "
            f"(whose digest covers settings and prompts too): re-record it with `{RECORD_COMMAND}`"
        )
    if record.get("card") != card:
        raise GoldenError(
            f"golden {path} was recorded on card {record.get('card')!r}, not {card!r}: logprobs are only "
            f"comparable on the same card; record one for {card!r} with `{RECORD_COMMAND}`"
        )
    if recipe is not None and record.get("recipe") != recipe:
        raise GoldenError(f"golden {path} is for recipe {record.get('recipe')!r}, not {recipe!r}")
    try:
        golden = Golden(record, path)
        entries = record["prompts"]
    except (KeyError, TypeError, ValueError, BitexactError) as exc:
        raise GoldenError(f"golden {path} is corrupted (missing or malformed field: {exc})") from None
    for entry, gen in zip(entries, golden.generations, strict=True):
        if entry.get("digests") != digests(gen):
            raise GoldenError(
                f"golden {path} is corrupted: the values of prompt {gen.prompt_id!r} "
                "do not match their digests"
            )
    if record.get("digest") != record_digest(record):
        raise GoldenError(
            f"golden {path} was edited after it was recorded: its digest covers the values, the prompts, "
            f"the settings and the metadata, and one of them changed; re-record it with `{RECORD_COMMAND}`"
        )
    return golden
