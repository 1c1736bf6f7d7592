"""Token text -> token id, for OpenAI-compatible answers that name tokens by text only.

Only a mapping that is certain is used: a text (or byte string) that more than one id decodes to is
ambiguous, and a text no id decodes to is unknown; both are refused, never guessed. The tokenizer is the
one `--tokenizer` names, and it must be the served model's: this module cannot tell.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from bitexact.errors import EngineError
from bitexact.prompts import byte_offset


@dataclass
class TextToIds:
    """Exact decoded text (and, where the server sends them, exact bytes) of every id in a vocabulary."""

    name: str
    by_text: dict[str, list[int]] = field(default_factory=dict)
    by_bytes: dict[bytes, list[int]] = field(default_factory=dict)

    def add(self, token_id: int, data: bytes) -> None:
        self.by_bytes.setdefault(data, []).append(token_id)
        try:
            self.by_text.setdefault(data.decode("utf-8"), []).append(token_id)
        except UnicodeDecodeError:
            pass  # a partial character has no text of its own; only its bytes identify it

    def lookup(self, text: str, raw: bytes | None = None) -> int | None:
        """The one id whose decoding is `raw` (when given) or `text`; None when there is not exactly one."""
        ids = self.by_bytes.get(raw) if raw is not None else self.by_text.get(text)
        return ids[0] if ids is not None and len(ids) == 1 else None

    def require(self, text: str, raw: bytes | None, where: str) -> int:
        token_id = self.lookup(text, raw)
        if token_id is not None:
            return token_id
        key: str | bytes = raw if raw is not None else text
        found = self.by_bytes.get(raw, []) if raw is not None else self.by_text.get(text, [])
        if found:
            problem = f"ambiguous: ids {found[:8]} all decode to it"
        else:
            problem = "no id of that tokenizer decodes to it"
        raise EngineError(
            f"{where}: the server names a token {key!r} by text only, and with --tokenizer {self.name} it is "
            f"{problem}. Token ids cannot be had from this answer; use a server option that returns ids "
            "(vLLM: return_tokens_as_token_ids or return_token_ids; SGLang: return_token_ids) or the "
            "served model's own tokenizer"
        )


def byte_vocabulary(offset: int, name: str) -> TextToIds:
    """bitexact's byte tokenizer: byte b is id b + offset."""
    table = TextToIds(name)
    for b in range(256):
        table.add(b + offset, bytes([b]))
    return table


def hf_vocabulary(path: str) -> TextToIds:
    """Every id of a local transformers tokenizer, as decoded alone and as decoded after another token.

    Servers report a token's text as it reads inside the output (vLLM's incremental detokenizer), while
    a SentencePiece-style decoder drops a leading space from a token decoded alone: `▁the` alone is
    "the", after "a" it is " the", and `▁▁the` alone may be " the". Both readings of every id are
    indexed, so such a text is found, and where readings of two ids collide it is ambiguous and refused
    instead of being mapped to the wrong one.
    """
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    ids = list(range(len(tok)))
    # decode() turns a partial UTF-8 character into U+FFFD; such ids then share that text and are
    # refused as ambiguous, which is what they are
    alone = tok.batch_decode([[i] for i in ids], skip_special_tokens=False)
    anchor_ids = tok.encode("a", add_special_tokens=False)
    after: list[str | None] = [None] * len(ids)
    if len(anchor_ids) == 1:
        prefix = tok.decode(anchor_ids, skip_special_tokens=False)
        joined = tok.batch_decode([[anchor_ids[0], i] for i in ids], skip_special_tokens=False)
        after = [text[len(prefix) :] if text.startswith(prefix) else None for text in joined]
    table = TextToIds(path)
    for token_id, first, second in zip(ids, alone, after, strict=True):
        for text in {first, second} - {None}:
            table.add(token_id, str(text).encode("utf-8"))
    return table


def load_vocabulary(spec: str) -> TextToIds:
    """`bytes`, `bytes:OFFSET` or a local tokenizer folder, as `--tokenizer` takes them."""
    offset = byte_offset(spec)
    return hf_vocabulary(spec) if offset is None else byte_vocabulary(offset, spec)


class LazyVocabulary:
    """Loads the vocabulary on first need: most servers give ids, and a large vocabulary takes seconds."""

    def __init__(self, spec: str | None, load: Callable[[str], TextToIds] = load_vocabulary) -> None:
        self.spec = spec
        self._load = load
        self._table: TextToIds | None = None
        self._lock = threading.Lock()  # requests in flight parse answers on several threads

    def get(self) -> TextToIds | None:
        if self.spec is None:
            return None
        with self._lock:
            if self._table is None:
                self._table = self._load(self.spec)
        return self._table
