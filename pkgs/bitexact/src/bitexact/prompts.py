"""Prompts: JSONL files of `{"id", "input_ids"}` or `{"id", "text"}`, and the shipped default battery."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Protocol

from bitexact.errors import UsageError


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

    def __init__(self, path: str) -> None:
        from transformers import AutoTokenizer

        self._tok = AutoTokenizer.from_pretrained(path)

    def encode(self, text: str) -> list[int]:
        return list(self._tok.encode(text, add_special_tokens=False))

    def decode(self, ids: list[int]) -> str:
        return str(self._tok.decode(ids))


def byte_offset(spec: str) -> int | None:
    """`--tokenizer`'s value read: the byte tokenizer's offset for `bytes` or `bytes:OFFSET`, None for a
    local tokenizer folder (which must exist)."""
    if spec == "bytes":
        return BYTE_OFFSET
    if spec.startswith("bytes:"):
        try:
            return int(spec.split(":", 1)[1])
        except ValueError:
            raise UsageError(f"--tokenizer {spec!r}: the offset after 'bytes:' must be a number") from None
    if not Path(spec).exists():
        raise UsageError(f"--tokenizer {spec!r}: not 'bytes' and no such path; give a local tokenizer folder")
    return None


def load_tokenizer(spec: str) -> Tokenizer:
    """`bytes` or `bytes:OFFSET` for the byte tokenizer, else a local tokenizer path."""
    offset = byte_offset(spec)
    return HFTokenizer(spec) if offset is None else ByteTokenizer(offset)


def parse_prompt(data: Any, where: str) -> Prompt:
    if not isinstance(data, dict) or "id" not in data:
        raise UsageError(f"{where}: each line must be a JSON object with an 'id'")
    ids = data.get("input_ids")
    text = data.get("text")
    if ids is None and text is None:
        raise UsageError(f"{where}: prompt {data['id']!r} has neither 'input_ids' nor 'text'")
    if ids is not None:
        if not isinstance(ids, list) or not ids or not all(isinstance(t, int) and t >= 0 for t in ids):
            raise UsageError(f"{where}: 'input_ids' of {data['id']!r} must be a non-empty list of ints >= 0")
        return Prompt(id=str(data["id"]), input_ids=tuple(ids))
    if not isinstance(text, str) or not text:
        raise UsageError(f"{where}: 'text' of {data['id']!r} must be a non-empty string")
    return Prompt(id=str(data["id"]), text=text)


def parse_jsonl(lines: list[str], source: str) -> list[Prompt]:
    prompts: list[Prompt] = []
    seen: set[str] = set()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UsageError(f"{source}:{number}: not JSON ({exc.msg})") from None
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
    return parse_jsonl(text.splitlines(), str(p))


def default_battery() -> list[Prompt]:
    """The shipped 24-prompt battery: varied lengths, code, several languages."""
    text = resources.files("bitexact").joinpath("data/battery.jsonl").read_text(encoding="utf-8")
    return parse_jsonl(text.splitlines(), "bitexact/data/battery.jsonl")


def tokenize_all(prompts: list[Prompt], tokenizer: Tokenizer | None) -> list[Prompt]:
    """Turn text prompts into input_ids on the client, so no server tokenizer can drift between runs."""
    if tokenizer is None:
        return prompts
    return [
        p if p.input_ids is not None else Prompt(id=p.id, input_ids=tuple(tokenizer.encode(p.text or "")))
        for p in prompts
    ]
