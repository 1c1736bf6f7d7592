"""The passes of a warm run (`bitexact warm`) and the order its requests go in, so that each pass meets
the cache it is meant to meet.

- Plain: for each prompt, the cache is flushed and the prompt runs alone (`cold`), then the same prompt
  again `warm_passes` times (`warm1`, `warm2`, ...; `inflight` at once), its prompt in the cache.
  Prompt by prompt, because a flush empties the cache of every other prompt too.
- Shared prefix: every prompt is the prefix followed by one question. Each runs alone after a flush
  (`cold`); then, per pass (`shared1`, ...), the cache is flushed, the prefix alone is sent (so it is
  cached), and the questions run `inflight` at once: each extends the cached prefix with its own tokens.
Before the warm answers of a prompt or pass, fills (CacheSetup) make sure the cache can supply them.

A result is named `<prompt id>#<pass>`; stored results resume as every verb's do (a resumed run fills
again what an earlier one cached). CacheSetup runs before each group and puts the cache in the state the
group's pass needs.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from bitexact.engines.base import Engine, Settings
from bitexact.prefixcache import CacheFlush, cached_tokens
from bitexact.prompts import Prompt

COLD, WARM, SHARED = "cold", "warm", "shared"


@dataclass(frozen=True)
class Group:
    """Requests sent together. `key`: the prompt id (cold, warm) or the pass name (shared) whose cache
    state the group needs."""

    kind: str
    key: str
    prompts: list[Prompt]


@dataclass(frozen=True)
class WarmPlan:
    prompts: list[Prompt]  # as compared (in shared mode: prefix + question)
    passes: list[str]  # cold first
    groups: list[Group]
    prefix: Prompt | None = None

    @property
    def copies(self) -> list[Prompt]:
        return [p for g in self.groups for p in g.prompts]


def copy_id(prompt_id: str, pass_name: str) -> str:
    return f"{prompt_id}#{pass_name}"


def _copy(prompt: Prompt, pass_name: str) -> Prompt:
    return Prompt(id=copy_id(prompt.id, pass_name), input_ids=prompt.input_ids, text=prompt.text)


def _chunks(items: list[Prompt], size: int) -> list[list[Prompt]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def _cold(prompts: list[Prompt]) -> list[Group]:
    return [Group(COLD, p.id, [_copy(p, COLD)]) for p in prompts]


def plain_plan(prompts: list[Prompt], warm_passes: int, inflight: int) -> WarmPlan:
    names = [f"{WARM}{k}" for k in range(1, warm_passes + 1)]
    groups: list[Group] = []
    for prompt, cold in zip(prompts, _cold(prompts), strict=True):
        groups.append(cold)
        warm = [_copy(prompt, name) for name in names]
        groups += [Group(WARM, prompt.id, chunk) for chunk in _chunks(warm, inflight)]
    return WarmPlan(prompts, [COLD, *names], groups)


def shared_plan(questions: list[Prompt], prefix: Prompt, passes: int, inflight: int) -> WarmPlan:
    """`questions` and `prefix` as token ids."""
    ids = prefix.input_ids or ()
    prompts = [Prompt(id=q.id, input_ids=ids + (q.input_ids or ())) for q in questions]
    names = [f"{SHARED}{k}" for k in range(1, passes + 1)]
    groups = _cold(prompts)
    for name in names:
        copies = [_copy(p, name) for p in prompts]
        groups += [Group(SHARED, name, chunk) for chunk in _chunks(copies, inflight)]
    return WarmPlan(prompts, [COLD, *names], groups, prefix)


def alignment(tokens: int) -> str:
    """How a prefix length lines up with page, chunk and split sizes (all powers of two)."""
    power = tokens & -tokens
    if power == 1:
        return f"{tokens} tokens: odd, so no page, chunk or split size (a power of two) divides it"
    return f"{tokens} tokens: a multiple of {power}, where pages, chunks and splits of up to {power} end"


FILLS = 3  # one-token requests that may be needed before a prompt's answers come from the cache


class CacheSetup:
    """Before each group of requests: the cache state its pass needs. A cold group gets a flush; before
    the first warm group of a prompt, or of a shared pass (after a flush), the prompt or the prefix is
    sent with one new token, not compared, until an answer shows cache hits (FILLS at most). A radix
    cache hits at once; a hybrid model's may need one more: SGLang 0.5.20's mamba radix cache
    (`mem_cache/mamba_radix_cache.py`) reuses a prefix only up to a node that holds the recurrent
    state, which it keeps at the ends of cached sequences and at the chunk-aligned point where a later
    match stopped short of one (`mamba_branching_seqlen`). The fills are listed in the summary."""

    def __init__(self, plan: WarmPlan, flush: CacheFlush, settings: Settings, label: str) -> None:
        self.plan, self.flusher, self.label = plan, flush, label
        self.fill_settings = Settings(max_new_tokens=1, top_logprobs=settings.top_logprobs)
        self.groups = {g.prompts[0].id: g for g in plan.groups}
        self.prompts = {p.id: p for p in plan.prompts}
        self.filled: set[str] = set()  # prompts and passes filled since the last flush
        self.primes: list[dict[str, Any]] = []

    def _flush(self) -> None:
        told = len(self.flusher.errors)
        reason = self.flusher.flush()
        if reason is not None and len(self.flusher.errors) > told:
            print(
                f"bitexact: {self.label}: the cache could not be flushed ({reason}); a cold answer counts "
                "only if it shows no cache hits",
                file=sys.stderr,
            )
        self.filled = set()

    def _fill(self, engine: Engine, prompt: Prompt, needed_by: str) -> None:
        fill = Prompt(id=f"{prompt.id}#fill", input_ids=prompt.input_ids, text=prompt.text)
        hits: list[int | None] = []
        while len(hits) < FILLS and not (hits and hits[-1]):
            (gen,) = list(engine.generate([fill], self.fill_settings))
            hits.append(cached_tokens(gen))
        self.primes.append({"prompt": prompt.id, "for": needed_by, "cached_tokens": hits})

    def before(self, engine: Engine, prompts: list[Prompt]) -> None:
        group = self.groups[prompts[0].id]
        if group.kind == COLD:
            self._flush()
            return
        if group.key in self.filled:
            return
        if group.kind == SHARED and self.plan.prefix is not None:
            self._flush()
            self._fill(engine, self.plan.prefix, group.key)
        else:
            self._fill(engine, self.prompts[group.key], group.key)
        self.filled.add(group.key)
