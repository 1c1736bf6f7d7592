"""A progress bar on stderr (redrawn in place on a terminal, one line per step elsewhere)."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    def __init__(self, label: str, total: int, stream: TextIO | None = None) -> None:
        self.label = label
        self.total = total
        self.done = 0
        self.stream = stream or sys.stderr
        self.start = time.monotonic()
        self.tty = self.stream.isatty()
        self._last_tenth = -1

    def advance(self, n: int = 1, note: str = "") -> None:
        self.done += n
        self._draw(note)

    def _draw(self, note: str) -> None:
        width = 24
        filled = int(width * self.done / self.total) if self.total else width
        bar = "#" * filled + "." * (width - filled)
        line = f"{self.label} [{bar}] {self.done}/{self.total} {time.monotonic() - self.start:6.1f}s {note}"
        if self.tty:
            self.stream.write("\r" + line.ljust(100))
            if self.done >= self.total:
                self.stream.write("\n")
        else:  # a log file: one line per tenth of the way, not one per prompt
            tenth = 10 * self.done // self.total if self.total else 10
            if tenth == self._last_tenth:
                return
            self._last_tenth = tenth
            self.stream.write(line.rstrip() + "\n")
        self.stream.flush()
