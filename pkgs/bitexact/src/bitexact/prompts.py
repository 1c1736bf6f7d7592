"""Prompts: JSONL files of `{"id", "input_ids"}` or `{"id", "text"}`, and the shipped default battery."""

from __future__ import annotations

import functools
import hashlib
import json
import unicodedata
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Protocol

from bitexact import strictjson
from bitexact.errors import UsageError

MAX_TOKEN_ID = 2**31 - 1  # token ids are int32 in every engine bitexact talks to
PROMPT_KEYS = {"id", "input_ids", "text"}


@dataclass(frozen=True)
class Prompt:
    id: str
    input_ids: tuple[int, ...] | None = None
    text: str | None = None

    def digest(self) -> str:
        """Identity of what is sent, so resumed or golden results are matched to the same prompt."""
        body = json.dumps({"input_ids": self.input_ids, "text": self.text}, sort_keys=True)
        return hashlib.sha256(body.encode()).hexdigest()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id}
        if self.input_ids is not None:
            out["input_ids"] = list(self.input_ids)
        if self.text is not None:
            out["text"] = self.text
        return out


class Tokenizer(Protocol):
    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: list[int]) -> str: ...


BYTE_OFFSET = 3  # the byte tokenizer's offset when `--tokenizer bytes` names none


class ByteTokenizer:
    """UTF-8 bytes shifted by `offset`: a tokenizer that needs no files, for models without one."""

    def __init__(self, offset: int = BYTE_OFFSET) -> None:
        self.offset = offset

    def encode(self, text: str) -> list[int]:
        return [b + self.offset for b in text.encode("utf-8")]

    def decode(self, ids: list[int]) -> str:
        """Ids outside the byte range (specials) show as U+FFFD, as broken UTF-8 does."""
        raw = bytes(i - self.offset if 0 <= i - self.offset < 256 else 0xFF for i in ids)
        return raw.decode("utf-8", errors="replace")


class HFTokenizer:
    """A transformers tokenizer loaded from a local path (no special tokens added)."""

    def __init__(self, path: str, what: str = "--tokenizer") -> None:
        from transformers import AutoTokenizer

        try:
            self._tok = AutoTokenizer.from_pretrained(path)
        except (OSError, ValueError, TypeError, KeyError) as error:  # what transformers raises for a folder
            first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise UsageError(
                f"{what} {path!r}: not a tokenizer transformers can load ({first}); give a local tokenizer "
                "folder (tokenizer.json or tokenizer_config.json with its files), or 'bytes'"
            ) from None

    def encode(self, text: str) -> list[int]:
        return list(self._tok.encode(text, add_special_tokens=False))

    def decode(self, ids: list[int]) -> str:
        return str(self._tok.decode(ids))

    def ids(self) -> frozenset[int]:
        """Every id this tokenizer has an entry for (its vocabulary and added tokens)."""
        return frozenset(int(i) for i in self._tok.get_vocab().values())


def byte_offset(spec: str) -> int | None:
    """`--tokenizer`'s value read: the byte tokenizer's offset for `bytes` or `bytes:OFFSET`, None for a
    local tokenizer folder (which must exist). The offset keeps every id a token id can be."""
    if spec == "bytes":
        return BYTE_OFFSET
    if spec.startswith("bytes:"):
        raw = spec.split(":", 1)[1]
        if not raw.isascii() or not raw.isdigit():
            raise UsageError(
                f"--tokenizer {spec!r}: the offset after 'bytes:' must be a whole number from 0 to "
                f"{MAX_TOKEN_ID - 255} (token ids are never negative), e.g. bytes:3"
            )
        offset = int(raw)
        if offset > MAX_TOKEN_ID - 255:
            raise UsageError(f"--tokenizer {spec!r}: the offset must be {MAX_TOKEN_ID - 255} or less")
        return offset
    if not Path(spec).exists():
        raise UsageError(f"--tokenizer {spec!r}: not 'bytes' and no such path; give a local tokenizer folder")
    return None


@functools.cache
def vocabulary_ids(spec: str) -> frozenset[int] | None:
    """The ids `--tokenizer` has entries for, which every token an engine chooses must be one of; None
    for the byte tokenizer, which encodes text as bytes and names no model's vocabulary (a model run
    with it may have more ids than its 256 bytes and specials)."""
    return None if byte_offset(spec) is not None else HFTokenizer(spec).ids()


def load_tokenizer(spec: str) -> Tokenizer:
    """`bytes` or `bytes:OFFSET` for the byte tokenizer, else a local tokenizer path."""
    offset = byte_offset(spec)
    return HFTokenizer(spec) if offset is None else ByteTokenizer(offset)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)  # JSON true is not the id 1


def prompt_id(value: Any, where: str) -> str:
    """A prompt's id: a non-empty string without control characters, or a whole number (read as its
    text). Anything else (null, true, a list) is refused, not turned into a string such as 'None'."""
    if _is_int(value):
        return str(value)
    if not isinstance(value, str) or not value:
        raise UsageError(f"{where}: 'id' is {json.dumps(value)}; give a non-empty string or a whole number")
    if any(unicodedata.category(c) == "Cc" for c in value):
        raise UsageError(f"{where}: 'id' {value!r} holds a control character; give a printable id")
    return text_of(value, "'id'", where)


def text_of(value: str, what: str, where: str) -> str:
    """`value` if it is text: JSON's \\u escapes can name a lone surrogate (\\ud800), which no UTF-8
    text holds, no tokenizer reads and no report can write."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        bad = value[error.start]
        raise UsageError(
            f"{where}: {what} holds a lone surrogate (\\u{ord(bad):04x}, half of a UTF-16 pair), which is "
            "not text; write the character whole"
        ) from None
    return value


def parse_prompt(data: Any, where: str) -> Prompt:
    """One prompt line as the JSONL format of --prompts defines it: an object of 'id' and exactly one of
    'input_ids' (a non-empty list of whole numbers from 0 to MAX_TOKEN_ID) or 'text' (a non-empty
    string). The one reader of prompts: --prompts, the shipped battery and the prompts of a golden."""
    if not isinstance(data, dict) or "id" not in data:
        raise UsageError(f"{where}: each line must be a JSON object with an 'id'")
    unknown = sorted(set(data) - PROMPT_KEYS)
    if unknown:
        raise UsageError(
            f"{where}: unknown key(s) {unknown}; a prompt line holds 'id' and one of 'input_ids' or 'text'"
        )
    pid = prompt_id(data["id"], where)
    if "input_ids" in data and "text" in data:
        raise UsageError(
            f"{where}: prompt {pid!r} has both 'input_ids' and 'text'; give one (which one would be sent?)"
        )
    if "input_ids" in data:
        ids = data["input_ids"]
        if (
            not isinstance(ids, list)
            or not ids
            or not all(_is_int(t) and 0 <= t <= MAX_TOKEN_ID for t in ids)
        ):
            raise UsageError(
                f"{where}: 'input_ids' of {pid!r} must be a non-empty list of ints >= 0 (whole numbers "
                f"up to {MAX_TOKEN_ID}; not booleans, not strings)"
            )
        return Prompt(id=pid, input_ids=tuple(ids))
    if "text" not in data:
        raise UsageError(f"{where}: prompt {pid!r} has neither 'input_ids' nor 'text'")
    text = data["text"]
    if not isinstance(text, str) or not text:
        raise UsageError(f"{where}: 'text' of {pid!r} must be a non-empty string")
    return Prompt(id=pid, text=text_of(text, f"'text' of {pid!r}", where))


def parse_jsonl(text: str, source: str) -> list[Prompt]:
    """Every prompt of a JSONL text (lines split as JSON Lines splits them: at "\\n" only)."""
    prompts: list[Prompt] = []
    seen: set[str] = set()
    for number, line in strictjson.lines(text):
        try:
            data = strictjson.loads(line)
        except strictjson.StrictJSONError as exc:
            raise UsageError(f"{source}:{number}: {exc}") from None
        prompt = parse_prompt(data, f"{source}:{number}")
        if prompt.id in seen:
            raise UsageError(f"{source}:{number}: duplicate prompt id {prompt.id!r}")
        seen.add(prompt.id)
        prompts.append(prompt)
    if not prompts:
        raise UsageError(f"{source}: no prompts")
    return prompts


def load_prompts(path: str | Path) -> list[Prompt]:
    from bitexact.files import read_text

    p = Path(path)
    text = read_text(p, "--prompts", "a JSONL file of {'id', 'input_ids'} or {'id', 'text'} lines")
    return parse_jsonl(text, str(p))


def default_battery() -> list[Prompt]:
    """The shipped 24-prompt battery: varied lengths, code, several languages."""
    text = resources.files("bitexact").joinpath("data/battery.jsonl").read_text(encoding="utf-8")
    return parse_jsonl(text, "bitexact/data/battery.jsonl")


def tokenize_all(prompts: list[Prompt], tokenizer: Tokenizer | None) -> list[Prompt]:
    """Turn text prompts into input_ids on the client, so no server tokenizer can drift between runs."""
    if tokenizer is None:
        return prompts
    out = []
    for p in prompts:
        if p.input_ids is None:
            ids = tuple(tokenizer.encode(p.text or ""))
            if not ids:
                raise UsageError(f"prompt {p.id!r}: its text tokenizes to no ids; give a longer text")
            p = Prompt(id=p.id, input_ids=ids)
        out.append(p)
    return out
