"""Run one request per prompt concurrently ("N in flight") and yield results as they finish."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed

from bitexact.errors import EngineError
from bitexact.generation import Generation
from bitexact.prompts import Prompt


def in_flight(prompts: list[Prompt], one: Callable[[Prompt], Generation]) -> Iterator[Generation]:
    """Successes are yielded even when a sibling request fails; the first failure is raised at the end,
    so the caller keeps every finished result of a server that died mid-run."""
    if len(prompts) == 1:
        yield one(prompts[0])
        return
    first_error: BaseException | None = None
    with ThreadPoolExecutor(max_workers=len(prompts)) as pool:
        futures = [pool.submit(one, p) for p in prompts]
        for future in as_completed(futures):
            try:
                result = future.result()
            except EngineError as exc:
                first_error = first_error or exc
                continue
            yield result
    if first_error is not None:
        raise first_error
