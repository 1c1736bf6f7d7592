"""Run a prompt battery on one engine: fixed groups (batch or in flight), results stored as they come,
finished prompts skipped on a rerun."""

from __future__ import annotations

from bitexact.engines.base import Engine, Settings
from bitexact.errors import EngineError
from bitexact.generation import Generation
from bitexact.progress import Progress
from bitexact.prompts import Prompt
from bitexact.results import ResultStore


def groups_of(prompts: list[Prompt], size: int) -> list[list[Prompt]]:
    """Fixed chunks of the full list, so a resumed run puts the same prompts together as the first one
    (batch composition can change numerics)."""
    return [prompts[i : i + size] for i in range(0, len(prompts), size)]


def run_battery(
    engine: Engine, prompts: list[Prompt], settings: Settings, store: ResultStore | None, label: str
) -> list[Generation]:
    done = store.load(prompts) if store else {}
    by_id = {p.id: p for p in prompts}
    bar = Progress(label, len(prompts))
    if done:
        bar.advance(len(done), "(resumed)")
    try:
        for group in groups_of(prompts, max(engine.group_size, 1)):
            if all(p.id in done for p in group):
                continue
            for generation in engine.generate(group, settings):
                if generation.prompt_id in done:
                    continue
                if store is not None:
                    store.append(by_id[generation.prompt_id], generation)
                done[generation.prompt_id] = generation
                bar.advance(1)
    except (EngineError, KeyboardInterrupt) as exc:
        kept = f"{len(done)}/{len(prompts)} results kept"
        where = f" in {store.path}; rerun the same command to resume" if store else ""
        reason = "interrupted" if isinstance(exc, KeyboardInterrupt) else str(exc)
        raise EngineError(f"{label}: {reason}\n{kept}{where}") from exc
    return [done[p.id] for p in prompts]
