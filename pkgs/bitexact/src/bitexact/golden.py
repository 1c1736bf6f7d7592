"""Golden records: values (token ids, logprobs, top-k per position) and their digests, keyed by card slug
and recipe, stored at `<golden dir>/<card slug>/<recipe>.json`."""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path
from typing import Any

import exactformats

from bitexact import strictjson
from bitexact.answers import as_asked, problem
from bitexact.argv import MAX_TOKENS, MAX_TOP_LOGPROBS
from bitexact.engines.base import Settings
from bitexact.errors import BitexactError, GoldenError
from bitexact.files import atomic_write_text, blocked_folder, dumps, path_state
from bitexact.generation import Generation
from bitexact.names import checked_name, inside
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
    """`<golden dir>/<card>/<recipe>.json`, proven inside the golden dir (both names are checked names)."""
    path = golden_dir / checked_name(card, "card") / f"{checked_name(recipe, 'recipe name')}.json"
    return inside(golden_dir, path, "golden")


def record_digest(record: dict[str, Any]) -> str:
    """Over everything in the record but the digest itself: the values, the prompts as sent, the settings,
    the card, recipe and variant, and the metadata. An edit to any of them is caught on load, so a check
    never blames the server for a changed `max_new_tokens` or prompt."""
    body = {key: value for key, value in record.items() if key != "digest"}
    return _sha([dumps(body, sort_keys=True, separators=(",", ":")).encode()])


def numbers_as_recorded(record: dict[str, Any], zero: float) -> dict[str, Any]:
    """`record` with every logprob a float again, as bitexact writes them, an integer 0 made `zero` (0.0
    or -0.0: a formatter writes -0.0 as -0, which reads back as the integer 0). A JSON formatter that
    writes the float -3.0 as -3 changes no value; this is how a load tells such a reformat from an edit."""

    def number(value: Any) -> Any:
        if type(value) is not int:
            return value
        return zero if value == 0 else float(value)

    def top(rows: Any) -> Any:
        if not isinstance(rows, list):
            return rows
        return [
            [[p[0], number(p[1])] if isinstance(p, list) and len(p) == 2 else p for p in row]
            if isinstance(row, list)
            else row
            for row in rows
        ]

    entries = record.get("prompts")
    if not isinstance(entries, list):
        return record
    fixed = [
        {
            **e,
            "logprobs": [number(v) for v in e["logprobs"]]
            if isinstance(e["logprobs"], list)
            else e["logprobs"],
            "top_logprobs": top(e["top_logprobs"]),
        }
        if isinstance(e, dict) and "logprobs" in e and "top_logprobs" in e
        else e
        for e in entries
    ]
    return {**record, "prompts": fixed}


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


def record_text(record: dict[str, Any]) -> str:
    """A golden record as its file holds it: standard JSON."""
    return dumps(record, indent=1) + "\n"


def write_record(record: dict[str, Any], path: Path) -> None:
    """Standard JSON through a temporary file and a rename (a full disk leaves the old file and no .tmp)."""
    atomic_write_text(path, record_text(record), option="--golden-dir/--golden")


class Golden:
    def __init__(self, record: dict[str, Any], path: Path) -> None:
        self.record = record
        self.path = path
        self.prompts = [
            parse_prompt(e["prompt"], f"{path}: prompt {i}") for i, e in enumerate(record["prompts"])
        ]
        ids = [p.id for p in self.prompts]
        if len(set(ids)) != len(ids):
            raise ValueError(
                f"a prompt id is given twice ({sorted(i for i in set(ids) if ids.count(i) > 1)})"
            )
        self.generations = [
            Generation.from_json({**e, "prompt_id": p.id})
            for p, e in zip(self.prompts, record["prompts"], strict=True)
        ]


def _state_error(path: Path, card: str) -> GoldenError | None:
    state = path_state(path)
    if state == "directory":
        return GoldenError(
            f"--golden {path} is a directory; give the golden file (<dir>/<card>/<recipe>.json)"
        )
    blocked = blocked_folder(path) if state == "missing" else None
    if blocked is not None:
        return GoldenError(f"golden {path}: {blocked}; give --golden-dir a folder (or --golden a file)")
    if state == "missing":
        return GoldenError(
            f"no golden record for card {card!r} at {path}: the check cannot pass without one. Record it on "
            f"that card with `{RECORD_COMMAND}` (or `bitexact golden record ENGINE --card {card}`)."
        )
    if state != "file":
        return GoldenError(f"golden {path} is {state}, not a file; point it at the golden record itself")
    return None


def replaceable(path: Path, *, card: str, recipe: str) -> None:
    """A golden record may replace what is at `path` only if that is nothing or a golden record of the
    same card and recipe: --force replaces goldens, never a history, a prompt file or anything else that
    happens to be there, nor another card's golden (`--golden g/rtx/x.json --card h200` would put an
    H200's values where the RTX's golden was)."""
    state = path_state(path)
    blocked = blocked_folder(path) if state == "missing" else None
    if blocked is not None:
        raise GoldenError(f"golden {path}: {blocked}; give --golden-dir a folder (or --golden a file)")
    if state == "missing":
        return
    error = _state_error(path, "")
    if error is not None:
        raise GoldenError(f"{error}; a golden is written only where there is none or a golden")
    try:
        record = strictjson.loads(path.read_bytes().decode("utf-8"))
    except (strictjson.StrictJSONError, UnicodeDecodeError, OSError):
        record = None
    if not isinstance(record, dict) or record.get("kind") != KIND:
        raise GoldenError(
            f"{path} is not a golden record, and --force replaces only golden records; give another "
            "--golden (or remove that file yourself if it is meant to go)"
        )
    theirs = (record.get("card"), record.get("recipe"))
    if theirs != (card, recipe):
        raise GoldenError(
            f"{path} is the golden of card {theirs[0]!r}, recipe {theirs[1]!r}, and this one is of card "
            f"{card!r}, recipe {recipe!r}: --force replaces a golden of the same card and recipe only; give "
            "another --golden (or remove that file yourself if it is meant to go)"
        )


def load_golden(path: Path, *, card: str, recipe: str | None) -> Golden:
    """Read and verify a golden record; every way it can be wrong is a GoldenError naming the fix."""
    error = _state_error(path, card)
    if error is not None:
        raise error
    try:
        text = exactformats.read_text(path, "golden", "the golden record itself (<dir>/<card>/<recipe>.json)")
    except exactformats.FormatError as exc:
        raise GoldenError(str(exc)) from None
    try:
        record = strictjson.loads(text)
    except strictjson.StrictJSONError as exc:
        raise GoldenError(
            f"golden {path} is corrupted (not standard JSON: {exc}); restore it as it was recorded "
            f"(`git checkout -- {path}` where it is committed), or re-record it with `{RECORD_COMMAND}`"
        ) from None
    if not isinstance(record, dict) or record.get("kind") != KIND:
        raise GoldenError(f"golden {path} is not a bitexact golden record")
    try:
        exactformats.check_schema(
            record.get("schema"),
            (SCHEMA,),
            f"golden {path}",
            reader="bitexact",
            older=f"its digest covers less than schema {SCHEMA}'s, which covers settings and prompts too: "
            f"re-record it with `{RECORD_COMMAND}`",
        )
    except exactformats.FormatError as exc:
        raise GoldenError(str(exc)) from None
    if record.get("card") != card:
        raise GoldenError(
            f"golden {path} was recorded on card {record.get('card')!r}, not {card!r}: logprobs are only "
            f"comparable on the same card; record one for {card!r} with `{RECORD_COMMAND}`"
        )
    if recipe is not None and record.get("recipe") != recipe:
        raise GoldenError(f"golden {path} is for recipe {record.get('recipe')!r}, not {recipe!r}")
    try:
        settings = stored_settings(record.get("settings"))
        golden = Golden(record, path)
        entries = record["prompts"]
        if not entries:
            raise ValueError("it holds no prompts")
    except (KeyError, TypeError, ValueError, AttributeError, BitexactError) as exc:
        raise GoldenError(f"golden {path} is corrupted (missing or malformed field: {exc})") from None
    recorded = record.get("digest")
    if recorded != record_digest(record) and any(
        recorded == record_digest(numbers_as_recorded(record, zero)) for zero in (0.0, -0.0)
    ):
        raise GoldenError(
            f"golden {path} was reformatted after it was recorded: its values are equal when parsed, but "
            "numbers are written differently (a logprob such as -3.0 written as -3, as JSON formatters do), "
            "and its digests cover them as recorded; restore the file as it was recorded "
            f"(`git checkout -- {path}` where it is committed): nothing needs recording again"
        )
    for entry, gen in zip(entries, golden.generations, strict=True):
        if entry.get("digests") != digests(gen):
            raise GoldenError(
                f"golden {path} is corrupted: the values of prompt {gen.prompt_id!r} do not match their "
                "digests (a value was changed, or a tool rewrote a number without its exact form, such as "
                f"-0.0 as 0); restore it as it was recorded (`git checkout -- {path}` where it is "
                f"committed), or re-record it with `{RECORD_COMMAND}`"
            )
    if recorded != record_digest(record):
        raise GoldenError(
            f"golden {path} was edited after it was recorded: its digest covers the values, the prompts, "
            f"the settings and the metadata, and one of them changed; re-record it with `{RECORD_COMMAND}`"
        )
    golden.generations = [as_asked(gen, settings) for gen in golden.generations]
    for prompt, gen in zip(golden.prompts, golden.generations, strict=True):
        bad = problem(gen, settings, prompt)
        if bad is not None:
            raise GoldenError(
                f"golden {path}: prompt {gen.prompt_id!r}: {bad}; a golden of answers that cannot be "
                f"compared in full would pass any check: re-record it with `{RECORD_COMMAND}`"
            )
    return golden


def stored_settings(stored: Any) -> Settings:
    """A golden's settings: whole numbers (not booleans) within the command line's bounds."""
    if not isinstance(stored, dict):
        raise ValueError("'settings' is not an object")
    values = []
    for name, low, high in (("max_new_tokens", 1, MAX_TOKENS), ("top_logprobs", 2, MAX_TOP_LOGPROBS)):
        value = stored.get(name)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ValueError(f"settings.{name} is {value!r}, not a whole number from {low} to {high}")
        values.append(value)
    return Settings(max_new_tokens=values[0], top_logprobs=values[1])
