"""llama.cpp's native `POST /completion` (`llamacpp+http://HOST:PORT`): every generated token id, and a
logprob and top-k alternatives for every position, byte-fallback tokens included.

What the server does (llama.cpp `tools/server`, read from its behaviour on Debian's llama-server 0.7.0,
build 11669, in checks/offline/bitexact/test_bitexact_llama_server.py): with `return_tokens` the answer's
`tokens` lists every generated id; `completion_probabilities` (with `n_probs`) has one entry `{id, logprob,
top_logprobs: [{id, logprob}]}` per token, except for a token after which the text ends inside a UTF-8
character (a byte-fallback token that starts a character): the server keeps no entry for it, on this
endpoint as on `/v1/completions`. So CJK text, emoji and any byte-token model lose positions.

How the gap is filled: the answer's entries are matched to their positions (an in-order subsequence of
`tokens`; when two matchings fit, every position is probed). A position without an entry is probed: the
same prompt plus the tokens before that position, one new token, `cache_prompt` on (the server reuses
the prefix and computes that one position, as a decode step does), and a logit bias that makes the new
token a complete character, so the server reports it. Its `top_logprobs` come from the raw logits before
any sampler (`post_sampling_probs` off), so they are that position's distribution: its first entry must
be the token the generation chose there (greedy), and its logprob is the one recorded. Probed positions
are listed in the generation's `meta.probed_positions`. An entry without alternatives (with a draft
model this build gives `top_logprobs: []` at every position its speculative steps produced, on both
endpoints) is probed the same way. With one slot (`-np 1`) the probe's numbers are
the generation's own (the offline test shows it bit for bit where the server reports both); with a draft
model the generation's verify steps may compute other bits than a one-token probe, which the probed
positions then show as a difference.

Other request fields: greedy (`temperature` 0), `ignore_eos`, `n_predict` = max_new_tokens, no prompt
cache for the generation itself (each prompt computed from scratch, as the recipe's
`--disable-radix-cache`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from bitexact.engines.base import Settings, Timing
from bitexact.engines.concurrent import in_flight
from bitexact.engines.http import HttpClient
from bitexact.engines.openai_identity import PROPS_KEYS
from bitexact.engines.openai_spec import spec_from_answer
from bitexact.engines.spec import EngineSpec
from bitexact.engines.values import count, logprob, reason, token_id
from bitexact.errors import EngineError
from bitexact.generation import Generation, TopEntry
from bitexact.prompts import Prompt

FORCE_BIAS = 1.0e4  # added to the forced token's logit in a probe: far above any logit gap
WIDE_PROBE = 1000  # alternatives asked of a probe whose top-k lacks the token the generation chose


def generation_request(prompt: Prompt, settings: Settings) -> dict[str, Any]:
    return {
        "prompt": list(prompt.input_ids) if prompt.input_ids is not None else prompt.text,
        "n_predict": settings.max_new_tokens,
        "temperature": 0.0,
        "n_probs": max(settings.top_logprobs, 1),
        "post_sampling_probs": False,
        "return_tokens": True,
        "ignore_eos": True,
        "cache_prompt": False,
        "stream": False,
    }


def _entry(raw: Any, where: str) -> tuple[int, float, list[TopEntry]]:
    alternatives = raw.get("top_logprobs") if isinstance(raw, dict) else None
    if not isinstance(raw, dict) or not isinstance(alternatives or [], list):
        raise EngineError(f"{where}: a completion_probabilities entry is not {{id, logprob, top_logprobs}}")
    top = []
    for alt in alternatives or []:
        if not isinstance(alt, dict):
            raise EngineError(f"{where}: a top_logprobs entry is {str(alt)[:60]!r}, not {{id, logprob}}")
        top.append(
            (
                token_id(alt.get("id"), "a top_logprobs id", where),
                logprob(alt.get("logprob"), "a top logprob", where),
            )
        )
    return (
        token_id(raw.get("id"), "an entry's id", where),
        logprob(raw.get("logprob"), "an entry's logprob", where),
        top,
    )


def align(tokens: list[int], entry_ids: list[int]) -> list[int | None] | None:
    """For each position of `tokens`, the index of its entry (None: the server kept none); the entries
    are an in-order subsequence of the tokens. None when two matchings fit (the caller probes them all)."""
    left: list[int] = []
    j = 0
    for i, token in enumerate(tokens):
        if j < len(entry_ids) and entry_ids[j] == token:
            left.append(i)
            j += 1
    if j < len(entry_ids):
        raise ValueError("entries are not a subsequence of the tokens")
    right: list[int] = []
    j = len(entry_ids) - 1
    for i in range(len(tokens) - 1, -1, -1):
        if j >= 0 and entry_ids[j] == tokens[i]:
            right.append(i)
            j -= 1
    if left != right[::-1]:
        return None
    where: list[int | None] = [None] * len(tokens)
    for index, position in enumerate(left):
        where[position] = index
    return where


class LlamaCppHttpEngine:
    def __init__(self, spec: EngineSpec, inflight: int = 1) -> None:
        self.label = spec.raw
        self.group_size = inflight
        self.client = HttpClient(
            spec.target, timeout=spec.timeout_s(), retries=spec.int_param("retries", 3), inflight=inflight
        )
        self._forced: int | None = None
        self._ends: list[int] | None = None

    def identity(self) -> dict[str, Any]:
        props = self.client.get_json("/props")
        if not isinstance(props, dict):
            raise EngineError(f"{self.client.base}/props: not a JSON object; is this llama.cpp's server?")
        ident: dict[str, Any] = {
            "engine": "llamacpp",
            "url": self.client.base,
            "version": props.get("build_info"),
        }
        ident.update({k: props[k] for k in PROPS_KEYS if k in props and k != "build_info"})
        return ident

    def _forced_token(self) -> int:
        """A token whose text is a whole character (`a`), so that a probe's one token is always reported."""
        if self._forced is None:
            answer = self.client.post_json(
                "/tokenize", {"content": "a", "add_special": False, "with_pieces": True}
            )
            pieces = answer.get("tokens") if isinstance(answer, dict) else None
            complete = [
                t["id"] for t in pieces or [] if isinstance(t, dict) and isinstance(t.get("piece"), str)
            ]
            if not complete:
                raise EngineError(
                    f"{self.client.base}/tokenize: no token for 'a' with a text piece: {answer!r:.300}"
                )
            self._forced = int(complete[0])
        return self._forced

    def _end_ids(self) -> list[int]:
        """The end-of-sequence token the request's `ignore_eos` keeps from being chosen (llama.cpp biases
        it to -inf before sampling, while the raw probabilities reported still hold it): its id, from
        the server's `/props` `eos_token` and `/tokenize`; [] where the server names none."""
        if self._ends is None:
            props = self.client.get_json("/props")
            eos = props.get("eos_token") if isinstance(props, dict) else None
            answer = (
                self.client.post_json(
                    "/tokenize", {"content": eos, "add_special": False, "parse_special": True}
                )
                if isinstance(eos, str) and eos
                else None
            )
            found = answer.get("tokens") if isinstance(answer, dict) else None
            ids = [t for t in found or [] if isinstance(t, int) and not isinstance(t, bool)]
            self._ends = ids if len(ids) == 1 else []
        return self._ends

    def _probe(
        self, prompt: Prompt, before: list[int], settings: Settings, where: str, n_probs: int | None = None
    ) -> list[TopEntry]:
        """The distribution at the position after `before`: its top `n_probs` (default: the top-k asked),
        highest first."""
        if prompt.input_ids is None:
            raise EngineError(
                f"{where}: prompt {prompt.id!r} is text and a position needs a probe, which sends token ids: "
                "give the prompts as input_ids (or --tokenizer) for byte-fallback output"
            )
        body = {
            "prompt": [*prompt.input_ids, *before],
            "n_predict": 1,
            "temperature": 0.0,
            "n_probs": n_probs or max(settings.top_logprobs, 1),
            "post_sampling_probs": False,
            "return_tokens": True,
            "ignore_eos": True,
            "cache_prompt": True,
            "logit_bias": [[self._forced_token(), FORCE_BIAS]],
        }
        answer = self.client.post_json("/completion", body)
        entries = answer.get("completion_probabilities") if isinstance(answer, dict) else None
        if not entries:
            raise EngineError(
                f"{where}: a probe at position {len(before)} of {prompt.id!r} came back without probabilities"
            )
        _, _, top = _entry(entries[0], where)
        if not top:
            raise EngineError(f"{where}: a probe of {prompt.id!r} gave no top_logprobs")
        return top

    def _probed(
        self, prompt: Prompt, tokens: list[int], position: int, settings: Settings, where: str
    ) -> tuple[float, list[TopEntry]]:
        """(logprob of the chosen token, top-k) at a probed position. Greedy decoding chooses the
        argmax; where the chosen token is not the argmax the probe reports (a tie listed the other way,
        or a speculative server's verify step that computed other bits than a one-token decode), that is
        a difference in the engine's numerics, not an answer that cannot be compared: the chosen token's
        own logprob is kept (from a wider probe where the top-k lacks it), and the runner reports the
        position (answers.not_argmax). Only a chosen token the distribution does not hold at all is an
        answer that cannot be compared."""
        token = tokens[position]
        top = self._probe(prompt, tokens[:position], settings, where)
        own = dict(top)
        if token not in own:
            own = dict(self._probe(prompt, tokens[:position], settings, where, n_probs=WIDE_PROBE))
        if token not in own:
            raise EngineError(
                f"{where}: at position {position} of {prompt.id!r} the generation chose {token}, which is "
                f"not among the top {WIDE_PROBE} of that position's distribution (argmax {top[0][0]}): "
                "its logprob cannot be had, so this answer cannot be compared"
            )
        return own[token], top

    def _one(self, prompt: Prompt, settings: Settings) -> Generation:
        where = f"{self.client.base}/completion"
        answer = self.client.post_json("/completion", generation_request(prompt, settings))
        if not isinstance(answer, dict) or not isinstance(answer.get("tokens"), list):
            raise EngineError(
                f"{where}: no `tokens` for {prompt.id!r} (a llama.cpp server too old for return_tokens?)"
            )
        tokens = [token_id(t, f"tokens[{i}]", where) for i, t in enumerate(answer["tokens"])]
        entries = [_entry(e, where) for e in answer.get("completion_probabilities") or []]
        try:
            where_of = align(tokens, [e[0] for e in entries])
        except ValueError:
            raise EngineError(
                f"{where}: the probabilities of {prompt.id!r} do not follow its tokens"
            ) from None
        logprobs: list[float] = []
        tops: list[list[TopEntry]] = []
        probed: list[int] = []
        for position in range(len(tokens)):
            index = None if where_of is None else where_of[position]
            if index is not None and entries[index][2]:
                _, logprob, top = entries[index]
            else:  # no entry, or one without alternatives (a position a draft model's step produced)
                logprob, top = self._probed(prompt, tokens, position, settings, where)
                probed.append(position)
            logprobs.append(logprob)
            tops.append(top[: settings.top_logprobs])
        # llama.cpp's `stop_type`: "limit" (n_predict reached), "eos", "word" (a stop string), "none"
        meta: dict[str, Any] = {"finish_reason": reason(answer.get("stop_type"))}
        if self._end_ids():  # what ignore_eos kept from being chosen (answers.not_argmax)
            meta["ignored_ids"] = self._end_ids()
        if probed:
            meta["probed_positions"] = probed
        generation = Generation(prompt.id, tokens, logprobs, tops, meta=meta)
        generation.spec = spec_from_answer(answer, f"{where} ({prompt.id!r})")
        return generation

    def generate(self, prompts: list[Prompt], settings: Settings) -> Iterator[Generation]:
        return in_flight(prompts, lambda p: self._one(p, settings))

    def timed(self, prompt: Prompt, max_new_tokens: int) -> Timing:
        body = generation_request(prompt, Settings(max_new_tokens, top_logprobs=0))
        body.update(stream=True, n_probs=0)
        start = time.perf_counter()
        first: float | None = None
        final: dict[str, Any] = {}
        for chunk in self.client.post_stream("/completion", body):
            now = time.perf_counter()
            if first is None and (chunk.get("tokens") or chunk.get("content")):
                first = now
            if chunk.get("stop"):
                final = chunk
        end = time.perf_counter()
        if first is None:
            raise EngineError(f"{self.client.base}/completion: the stream carried no tokens")
        where = f"{self.client.base}/completion (streamed)"
        sent = count(final.get("tokens_evaluated"), "tokens_evaluated", where)
        return Timing(
            prompt_tokens=sent or len(prompt.input_ids or ()),
            new_tokens=count(final.get("tokens_predicted"), "tokens_predicted", where) or 0,
            ttft_s=first - start,
            decode_s=end - first,
        )

    def close(self) -> None:
        pass
