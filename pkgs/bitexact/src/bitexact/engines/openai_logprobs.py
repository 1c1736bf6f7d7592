"""The logprob dialects of OpenAI-compatible `/v1/completions` answers, read into one Generation.

Dialects, with the source each was read from:
- legacy completions: `choices[0].logprobs` = `{tokens, token_logprobs, top_logprobs: [{text: lp}],
  text_offset}`. vLLM (`vllm/entrypoints/openai/completion/protocol.py`: CompletionLogProbs,
  CompletionResponseChoice.token_ids with `return_token_ids`; `return_tokens_as_token_ids` writes every
  token and top-logprob key as `token_id:N`) and SGLang 0.5.20 (`srt/entrypoints/openai/protocol.py`:
  LogProbs, CompletionResponseChoice.token_ids with `return_token_ids`; keys are token text).
- chat style: `choices[0].logprobs` = `{content: [{token, logprob, bytes, top_logprobs: [{token, logprob,
  bytes}]}]}`, OpenAI's chat shape. llama.cpp's server answers `/v1/completions` in it and adds the token
  `id` to every entry and alternative (`tools/server/server-task.cpp`:
  completion_token_output::probs_vector_to_json, server_task_result_cmpl_final::to_json_oaicompat);
  SGLang 0.5.20 (ChoiceLogprobs) and vLLM chat answers carry no id.

Token ids come from the answer where it has them (`choices[0].token_ids`, an `id` per entry, or
`token_id:N` texts; where several are present they must agree). Otherwise a vocabulary from
`--tokenizer` maps each token's text (or bytes) to its one id, and an answer it cannot map exactly is
refused: text is never compared as if it were an id.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bitexact.engines.token_text import TextToIds
from bitexact.engines.values import count, generated_count, logprob, reason, token_id
from bitexact.errors import EngineError
from bitexact.generation import Generation, TopEntry
from bitexact.prompts import Prompt

TOKEN_ID_PREFIX = "token_id:"

# Gives the `--tokenizer` vocabulary (None: none given); called only when an answer lacks ids, since
# loading a large vocabulary takes seconds
Vocab = Callable[[], TextToIds | None]


def no_vocab() -> TextToIds | None:
    return None


@dataclass(frozen=True)
class Named:
    """A token as the answer names it: its own id if the answer gives one, its text, its bytes."""

    token_id: int | None
    text: str
    raw: bytes | None


@dataclass(frozen=True)
class Position:
    token: Named
    logprob: float
    top: list[tuple[Named, float]]


def id_in_text(text: str, where: str) -> int | None:
    """vLLM's `return_tokens_as_token_ids` spelling, `token_id:N` (N in ASCII digits, as vLLM writes
    it); None for text that is not in that spelling. Text in the spelling whose N is no whole number
    (`token_id:-3`, non-ASCII digits, `1_0`, nothing) is refused: it names an id no engine has, and
    read as the token's text it would be compared as if it were one."""
    if not text.startswith(TOKEN_ID_PREFIX):
        return None
    digits = text[len(TOKEN_ID_PREFIX) :]
    if not (digits.isascii() and digits.isdigit()):
        raise EngineError(
            f"{where}: the token {text[:40]!r} is written as vLLM writes token ids (token_id:N) but "
            "N is not a token id (a whole number in ASCII digits)"
        )
    return int(digits)


def _raw(value: Any) -> bytes | None:
    if isinstance(value, list) and all(isinstance(b, int) and 0 <= b < 256 for b in value):
        return bytes(value)
    return None


def listed(value: Any, what: str, where: str) -> list[Any]:
    """A list the answer holds, or none (null or absent: []); anything else (a number, a string, an
    object) is refused, naming it: the positions would be read from what is not a list of them."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise EngineError(f"{where}: {what} is {str(value)[:60]!r}, not a list")
    return value


def _named_entry(entry: Any, where: str) -> tuple[Named, float]:
    """One chat-style entry or alternative: `{token, logprob, bytes[, id]}`."""
    if not isinstance(entry, dict):
        raise EngineError(f"{where}: a logprobs.content entry is {entry!r}, not an object")
    if "logprob" not in entry and "prob" in entry:
        raise EngineError(
            f"{where}: the server sent post-sampling probabilities (`prob`), not logprobs; turn off "
            "post_sampling_probs on the server (llama.cpp) so raw logprobs can be compared"
        )
    text = entry.get("token")
    if not isinstance(text, str):
        raise EngineError(f"{where}: a logprobs.content entry has no token text: {str(entry)[:200]}")
    own = entry.get("id")
    token_id = own if isinstance(own, int) and not isinstance(own, bool) else id_in_text(text, where)
    return Named(token_id, text, _raw(entry.get("bytes"))), logprob(entry.get("logprob"), "logprob", where)


def chat_style_positions(logprobs: dict[str, Any], where: str) -> list[Position]:
    content = logprobs["content"]
    if not isinstance(content, list):
        raise EngineError(f"{where}: logprobs.content is not a list")
    positions = []
    for entry in content:
        token, value = _named_entry(entry, where)
        alternatives = listed(entry.get("top_logprobs"), "a logprobs.content entry's top_logprobs", where)
        top = [_named_entry(alt, where) for alt in alternatives]
        positions.append(Position(token, value, top))
    return positions


def legacy_positions(logprobs: dict[str, Any], where: str) -> list[Position]:
    values = logprobs["token_logprobs"]
    texts = listed(logprobs.get("tokens"), "logprobs.tokens", where)
    rows = listed(logprobs.get("top_logprobs"), "logprobs.top_logprobs", where)
    if not isinstance(values, list) or not isinstance(texts, list) or len(texts) != len(values):
        raise EngineError(f"{where}: logprobs.tokens and logprobs.token_logprobs differ in length")
    positions = []
    for i, (text, value) in enumerate(zip(texts, values, strict=True)):
        row = rows[i] if i < len(rows) and isinstance(rows[i], dict) else {}
        top = [
            (Named(id_in_text(k, where), k, None), logprob(v, "a top logprob", where)) for k, v in row.items()
        ]
        token = Named(id_in_text(str(text), where), str(text), None)
        positions.append(Position(token, logprob(value, f"token_logprobs[{i}]", where), top))
    return positions


def positions_of(choice: dict[str, Any], where: str) -> tuple[str, list[Position]]:
    """(dialect name, positions) of one choice; a choice without logprobs is refused."""
    logprobs = choice.get("logprobs")
    if isinstance(logprobs, dict) and "content" in logprobs:
        return "chat-style logprobs.content", chat_style_positions(logprobs, where)
    if isinstance(logprobs, dict) and "token_logprobs" in logprobs:
        return "legacy tokens/token_logprobs", legacy_positions(logprobs, where)
    raise EngineError(
        f"{where}: no logprobs in the answer (choices[0].logprobs is {str(logprobs)[:120]}); "
        "neither the legacy `token_logprobs` nor the chat-style `content` form"
    )


def _choice_ids(choice: dict[str, Any], where: str) -> list[int] | None:
    ids = choice.get("token_ids", choice.get("response_token_ids"))  # SGLang's chat spells it so
    if ids is None:
        return None
    if not isinstance(ids, list):
        raise EngineError(f"{where}: choices[0].token_ids is {str(ids)[:60]!r}, not a list")
    return [token_id(t, f"choices[0].token_ids[{i}]", where) for i, t in enumerate(ids)]


def resolve_ids(
    choice: dict[str, Any], positions: list[Position], vocab: Vocab, dialect: str, where: str
) -> list[int]:
    from_entries = [p.token.token_id for p in positions]
    listed = _choice_ids(choice, where)
    if listed is not None:
        if len(listed) != len(positions):
            raise EngineError(f"{where}: {len(listed)} token_ids but {len(positions)} logprobs")
        if all(t is not None for t in from_entries) and from_entries != listed:
            raise EngineError(f"{where}: choices[0].token_ids and the ids in the logprobs disagree")
        return listed
    if all(t is not None for t in from_entries):
        return [int(t) for t in from_entries if t is not None]
    table = vocab()
    if table is None:
        raise EngineError(
            f"{where}: the answer ({dialect}) names tokens by text only and has no token ids; comparing "
            "text as ids would be wrong. Give --tokenizer (the served model's tokenizer) to map text to "
            "ids, or turn on the server's ids (vLLM: return_tokens_as_token_ids, return_token_ids; "
            "SGLang: return_token_ids; llama.cpp gives them always)"
        )
    return [
        p.token.token_id
        if p.token.token_id is not None
        else table.require(p.token.text, p.token.raw, f"{where} position {i}")
        for i, p in enumerate(positions)
    ]


def _top_row(top: list[tuple[Named, float]], vocab: Vocab) -> list[TopEntry]:
    """Alternatives by id where known (from the answer, or mapped exactly by `--tokenizer`); by text
    otherwise, and then the comparison uses their values only, never the text as an id."""
    row: list[TopEntry] = []
    for named, value in top:
        token_id = named.token_id
        if token_id is None:
            table = vocab()
            token_id = table.lookup(named.text, named.raw) if table is not None else None
        row.append((token_id if token_id is not None else named.text, value))
    return sorted(row, key=lambda e: (-e[1], str(e[0])))


def check_count(response: dict[str, Any], n: int, where: str) -> None:
    """Every generated token must have its logprob, or positions would be matched to the wrong tokens.
    llama.cpp's server (tools/server/server-context.cpp process_token) leaves out the entry of a token
    whose text ends inside a UTF-8 character, while usage still counts it."""
    usage = response.get("usage")
    counted = usage.get("completion_tokens") if isinstance(usage, dict) else None
    hint = (
        " (llama.cpp's server leaves out tokens that end inside a UTF-8 character; no setting restores them)"
    )
    generated_count(counted, n, "usage.completion_tokens", where, hint)


def usage_counts(usage: Any, where: str) -> dict[str, Any] | None:
    """The answer's `usage`, as its record keeps it: the counts of prompt, generated and cached prompt
    tokens (`prompt_tokens_details.cached_tokens`), each read strictly (engines/values.py), and nothing
    else of it (a field this reader does not know is never stored as it came). None where it has none."""
    if usage is None:
        return None
    if not isinstance(usage, dict):
        raise EngineError(f"{where}: usage is {str(usage)[:60]!r}, not an object of token counts")
    kept: dict[str, Any] = {}
    for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
        value = count(usage.get(key), f"usage.{key}", where)
        if value is not None:
            kept[key] = value
    details = usage.get("prompt_tokens_details")
    if details is not None and not isinstance(details, dict):
        raise EngineError(f"{where}: usage.prompt_tokens_details is {str(details)[:60]!r}, not an object")
    if isinstance(details, dict):
        cached = count(details.get("cached_tokens"), "usage.prompt_tokens_details.cached_tokens", where)
        if cached is not None:
            kept["prompt_tokens_details"] = {"cached_tokens": cached}
    return kept


def parse_logprobs(prompt: Prompt, response: Any, where: str, vocab: Vocab = no_vocab) -> Generation:
    """Ids, logprobs and alternatives of one answer (`meta.dialect` names its form); the caller adds the
    speculation proof."""
    try:
        choice = response["choices"][0]
    except (KeyError, IndexError, TypeError):
        raise EngineError(
            f"{where}: answer for {prompt.id!r} has no choices[0]: {str(response)[:300]}"
        ) from None
    if len(response["choices"]) != 1:  # one was asked (n=1): which of several would be the answer?
        raise EngineError(
            f"{where}: answer for {prompt.id!r} holds {len(response['choices'])} choices, not the one "
            "asked (n=1); which one would be compared?"
        )
    where = f"{where} ({prompt.id!r})"
    dialect, positions = positions_of(choice, where)
    check_count(response, len(positions), where)
    token_ids = resolve_ids(choice, positions, vocab, dialect, where)
    usage = usage_counts(response.get("usage"), where)
    return Generation(
        prompt_id=prompt.id,
        token_ids=token_ids,
        logprobs=[p.logprob for p in positions],
        top_logprobs=[_top_row(p.top, vocab) for p in positions],
        meta={
            "finish_reason": reason(choice.get("finish_reason")),
            "usage": usage,
            "dialect": dialect,
        },
    )
