"""The interface every engine implements."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from bitexact.generation import Generation
from bitexact.prompts import Prompt


@dataclass(frozen=True)
class Settings:
    """Greedy decoding with a fixed length: what every comparison uses."""

    max_new_tokens: int = 64
    top_logprobs: int = 5  # alternatives per position; >= 2 so the top-1/top-2 margin is known

    def to_json(self) -> dict[str, Any]:
        return {"max_new_tokens": self.max_new_tokens, "top_logprobs": self.top_logprobs}


@dataclass(frozen=True)
class Timing:
    """One streamed request: time to first token and the decode rate after it."""

    prompt_tokens: int
    new_tokens: int
    ttft_s: float
    decode_s: float

    @property
    def decode_tps(self) -> float:
        return (self.new_tokens - 1) / self.decode_s if self.decode_s > 0 and self.new_tokens > 1 else 0.0


class Engine(Protocol):
    label: str
    group_size: int  # prompts run together (batch, or requests in flight)

    def identity(self) -> dict[str, Any]:
        """Build and software identity (versions, server args) for reports and golden metadata."""
        ...

    def generate(self, prompts: list[Prompt], settings: Settings) -> Iterator[Generation]:
        """Run the prompts together (one batch, or all in flight) and yield each result when it is done;
        results finished before a failure are yielded before the error is raised."""
        ...

    def timed(self, prompt: Prompt, max_new_tokens: int) -> Timing:
        """One single-stream request with timing (bench)."""
        ...

    def close(self) -> None: ...
