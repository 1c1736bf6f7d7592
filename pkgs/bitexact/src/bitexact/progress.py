"""A progress bar on stderr (redrawn in place on a terminal, one line per step elsewhere), with a
watchdog that says so when no result has come for a while, so a hung server is never a frozen bar."""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO


class Progress:
    def __init__(self, label: str, total: int, stream: TextIO | None = None) -> None:
        self.label = label
        self.total = total
        self.done = 0
        self.stream = stream or sys.stderr
        self.start = time.monotonic()
        self.last = self.start  # when the last result came
        self.tty = self.stream.isatty()
        self._last_tenth = -1
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._watchdog: threading.Thread | None = None

    def advance(self, n: int = 1, note: str = "") -> None:
        with self._lock:
            self.done += n
            self.last = time.monotonic()
            self._draw(note)

    def watch(self, stall_s: float) -> None:
        """Warn on stderr after `stall_s` without a result, and again after each further `stall_s`;
        on a terminal the bar's clock keeps running meanwhile."""
        if self._watchdog is not None or self.done >= self.total:
            return
        self._watchdog = threading.Thread(target=self._watch, args=(stall_s,), daemon=True)
        self._watchdog.start()

    def stop(self) -> None:
        self._stop.set()

    def _watch(self, stall_s: float) -> None:
        warned_for = 0.0
        tick = min(1.0, stall_s / 4)
        while not self._stop.wait(tick):
            with self._lock:
                if self.done >= self.total:
                    return
                quiet = time.monotonic() - self.last
                if quiet < warned_for:
                    warned_for = 0.0  # a result came in between: start counting again
                if quiet >= warned_for + stall_s:
                    warned_for = quiet
                    if self.tty:
                        self.stream.write("\n")
                    self.stream.write(
                        f"bitexact: {self.label}: no result for {quiet:.0f} s "
                        f"({self.total - self.done} still to come); still waiting\n"
                    )
                    self.stream.flush()
                elif self.tty:
                    self._draw("", force=True)

    def _draw(self, note: str, force: bool = False) -> None:
        width = 24
        filled = int(width * self.done / self.total) if self.total else width
        bar = "#" * filled + "." * (width - filled)
        line = f"{self.label} [{bar}] {self.done}/{self.total} {time.monotonic() - self.start:6.1f}s {note}"
        if self.tty:
            self.stream.write("\r" + line.ljust(100))
            if self.done >= self.total and not force:
                self.stream.write("\n")
        else:  # a log file: one line per tenth of the way, not one per prompt
            tenth = 10 * self.done // self.total if self.total else 10
            if tenth == self._last_tenth:
                return
            self._last_tenth = tenth
            self.stream.write(line.rstrip() + "\n")
        self.stream.flush()
