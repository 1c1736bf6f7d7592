"""Run a prompt battery on one engine: fixed groups (batch or in flight), each result stored the moment
it arrives, finished prompts skipped on a rerun."""

from __future__ import annotations

import sys
from collections.abc import Callable, Collection, Iterator

from bitexact.answers import as_asked, non_finite, not_argmax, problem
from bitexact.engines.base import Engine, Settings
from bitexact.errors import EngineError
from bitexact.generation import Generation
from bitexact.progress import Progress
from bitexact.prompts import Prompt
from bitexact.results import ResultStore

STALL_S = 60.0  # no result for this long: say so on stderr (and again each time as long again passes)


def groups_of(prompts: list[Prompt], size: int) -> list[list[Prompt]]:
    """Fixed chunks of the full list, so a resumed run puts the same prompts together as the first one
    (batch composition can change numerics)."""
    return [prompts[i : i + size] for i in range(0, len(prompts), size)]


def _finish(it: Iterator[Generation], save: Callable[[Generation], None]) -> None:
    """After an interrupt: results the engine had finished but not yet handed over are saved too.
    A generator suspended at a yield gets the interrupt thrown in (concurrent.in_flight then yields
    what had finished); one that was itself interrupted has already done so and is exhausted."""
    throw = getattr(it, "throw", None)
    if throw is None:
        return
    try:
        save(throw(KeyboardInterrupt()))
        for generation in it:
            save(generation)
    except (KeyboardInterrupt, StopIteration, EngineError):
        pass


def refusal(
    generation: Generation,
    settings: Settings,
    prompt: Prompt | None = None,
    vocabulary: Collection[int] | None = None,
) -> str | None:
    """Why an engine's answer is refused (answers.py), in the words of an engine error; None if kept."""
    bad = non_finite(generation)
    if bad is not None:
        return (
            f"prompt {generation.prompt_id!r}, {bad}: the engine's numerics are broken (NaN or infinity "
            "where a logprob belongs), so nothing of this prompt is stored or recorded; check the card, "
            "the weights and the dtype"
        )
    bad = problem(generation, settings, prompt, vocabulary)
    if bad is not None:
        return (
            f"prompt {generation.prompt_id!r}: {bad}; an answer not compared in full never counts as "
            "equal, so nothing of this prompt is stored or recorded (asked: "
            f"{settings.max_new_tokens} tokens, each with its logprob and the top-{settings.top_logprobs} "
            "alternatives)"
        )
    return None


def _kept(
    done: dict[str, Generation],
    settings: Settings,
    where: str,
    by_id: dict[str, Prompt],
    vocabulary: Collection[int] | None,
) -> dict[str, Generation]:
    """Stored results that pass the gate (a file written by an older bitexact, or edited, may hold
    others), cut to what was asked; those that do not are redone."""
    kept = {}
    for item, stored in done.items():
        generation = as_asked(stored, settings)
        bad = problem(generation, settings, by_id.get(item), vocabulary)
        if bad is None:
            kept[item] = generation
        else:
            print(
                f"bitexact: {where}: the stored result of {item!r} is refused ({bad}); it is redone",
                file=sys.stderr,
            )
    return kept


def run_battery(
    engine: Engine,
    prompts: list[Prompt],
    settings: Settings,
    store: ResultStore | None,
    label: str,
    groups: list[list[Prompt]] | None = None,
    before_group: Callable[[list[Prompt]], None] | None = None,
    vocabulary: Collection[int] | None = None,
) -> list[Generation]:
    """`groups`: the prompts run together, in order (default: fixed chunks of the engine's group size);
    `before_group` runs before each group that has a prompt left to run (a cache flush, say). Stored
    results and new answers alike pass the answer check (answers.py): a refused stored one is redone, a
    refused new one is an engine error. Every answer is first cut to what was asked (answers.as_asked);
    `vocabulary`: the ids of the --tokenizer given, which every chosen id must be one of."""
    by_id = {p.id: p for p in prompts}
    done = _kept(store.load(prompts), settings, str(store.path), by_id, vocabulary) if store else {}
    bar = Progress(label, len(prompts))
    if done:
        bar.advance(len(done), "(resumed)")

    def save(answer: Generation) -> None:
        if answer.prompt_id in done or answer.prompt_id not in by_id:
            return
        generation = as_asked(answer, settings)
        bad = refusal(generation, settings, by_id[generation.prompt_id], vocabulary)
        if bad is not None:
            raise EngineError(bad)
        inconsistent = not_argmax(generation)
        if inconsistent:  # compared as it is; kept with the answer, for its record and reports
            generation.meta["not_argmax"] = inconsistent
        if store is not None:
            store.append(by_id[generation.prompt_id], generation)
        done[generation.prompt_id] = generation
        bar.advance(1)

    where = f" in {store.path}" if store else ""

    def kept() -> int:
        """What a rerun resumes from: the store as written, not `done`, which a Ctrl-C between a
        result's append and its entry in `done` leaves one short."""
        if store is None:
            return len(done)
        try:
            stored = store.load(prompts)
        except Exception:  # a report must not replace the interrupt or error it reports
            return len(done)
        return sum(
            problem(as_asked(gen, settings), settings, by_id.get(item), vocabulary) is None
            for item, gen in stored.items()
        )

    bar.watch(STALL_S)
    try:
        for group in groups or groups_of(prompts, max(engine.group_size, 1)):
            if all(p.id in done for p in group):
                continue
            if before_group is not None:
                before_group(group)
            it = iter(engine.generate(group, settings))
            try:
                for generation in it:
                    save(generation)
            except KeyboardInterrupt:
                _finish(it, save)
                raise
    except KeyboardInterrupt:
        bar.stop()
        print(
            f"\nbitexact: {label}: interrupted; {kept()}/{len(prompts)} results kept{where}; "
            "rerun the same command to resume",
            file=sys.stderr,
        )
        raise
    except EngineError as exc:
        bar.stop()
        rerun = "rerun the same command to resume" if store else "rerun"
        raise EngineError(
            f"{label}: {exc}\nstopped: {kept()}/{len(prompts)} results kept{where}; {rerun}"
        ) from exc
    finally:
        bar.stop()
    return [done[p.id] for p in prompts]
