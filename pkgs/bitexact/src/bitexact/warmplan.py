"""The passes of a warm run (`bitexact warm`) and the order its requests go in, so that each pass meets
the cache it is meant to meet.

- Plain: for each prompt, the cache is flushed and the prompt runs alone (`cold`), then the same prompt
  again `warm_passes` times (`warm1`, `warm2`, ...; `inflight` at once), its whole prompt in the cache.
  Prompt by prompt, because a flush empties the cache of every other prompt too.
- Shared prefix: every prompt is the prefix followed by one question. Each runs alone after a flush
  (`cold`); then, per pass (`shared1`, ...), the cache is flushed, the prefix alone is sent once (so it is
  cached), and the questions run `inflight` at once: each extends the cached prefix with its own tokens.

A result is named `<prompt id>#<pass>`; stored results resume as every verb's do. CacheSetup runs before
each group and puts the cache in the state the group's pass needs.
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


class CacheSetup:
    """Before each group of requests: the cache state its pass needs (warmplan.py). Remembers what this
    process put in the cache since its last flush, so a resumed run primes what an earlier one cached."""

    def __init__(self, plan: WarmPlan, flush: CacheFlush, settings: Settings, label: str) -> None:
        self.plan, self.flusher, self.label = plan, flush, label
        self.fill = Settings(max_new_tokens=1, top_logprobs=settings.top_logprobs)
        self.groups = {g.prompts[0].id: g for g in plan.groups}
        self.prompts = {p.id: p for p in plan.prompts}
        self.cached: set[str] = set()
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
        self.cached = set()

    def _prime(self, engine: Engine, prompt: Prompt, needed_by: str) -> None:
        """Send `prompt` once (one new token, not compared) so that it is in the cache."""
        fill = Prompt(id=f"{prompt.id}#fill", input_ids=prompt.input_ids, text=prompt.text)
        (gen,) = list(engine.generate([fill], self.fill))
        self.primes.append({"prompt": prompt.id, "for": needed_by, "cached_tokens": cached_tokens(gen)})

    def before(self, engine: Engine, prompts: list[Prompt]) -> None:
        group = self.groups[prompts[0].id]
        if group.kind == COLD:
            self._flush()
        elif group.key not in self.cached:
            if group.kind == SHARED and self.plan.prefix is not None:
                self._flush()
                self._prime(engine, self.plan.prefix, group.key)
            else:  # a warm pass whose cold answer an earlier run stored: its prompt is cached again
                self._prime(engine, self.prompts[group.key], group.key)
        self.cached.add(group.key)
