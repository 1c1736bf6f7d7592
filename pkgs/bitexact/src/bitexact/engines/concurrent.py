"""Run one request per prompt concurrently ("N in flight") and yield results as they finish."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator

from bitexact.generation import Generation
from bitexact.prompts import Prompt


def in_flight(prompts: list[Prompt], one: Callable[[Prompt], Generation]) -> Iterator[Generation]:
    """Each finished result is yielded at once, also when a sibling request fails (the first failure is
    raised after the others end) and when the run is interrupted: a KeyboardInterrupt, here or thrown
    in by the caller, first yields whatever had finished, then goes on. The workers are daemon
    threads, so an interrupted process exits without waiting for requests still in flight."""
    done: queue.Queue[tuple[Generation | None, BaseException | None]] = queue.Queue()

    def work(prompt: Prompt) -> None:
        try:
            done.put((one(prompt), None))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread, raised there
            done.put((None, exc))

    for prompt in prompts:
        threading.Thread(target=work, args=(prompt,), name=f"bitexact {prompt.id}", daemon=True).start()
    first_error: BaseException | None = None
    try:
        for _ in prompts:
            result, error = done.get()
            if error is not None:
                first_error = first_error or error
            elif result is not None:
                yield result
    except KeyboardInterrupt:
        while True:
            try:
                result, _ = done.get_nowait()
            except queue.Empty:
                break
            if result is not None:
                yield result
        raise
    if first_error is not None:
        raise first_error
