"""How a perf run fails and speaks: RunError (exit 2, the message names what and where), OutOfTime (exit 3:
this call's time is spent, a rerun of the same command resumes) and the progress lines on stderr."""

from __future__ import annotations

import sys
import time

OUT_OF_TIME = 3


class RunError(RuntimeError):
    """A stage failed; the message names what and where its log is."""


class OutOfTime(RuntimeError):
    """Too little of this call's time is left for the next stage; a rerun resumes."""


def log(message: str) -> None:
    print(f"[perf {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)
