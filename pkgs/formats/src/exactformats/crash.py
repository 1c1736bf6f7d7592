"""No traceback on the terminal: a program's unexpected error becomes one line (what failed, where) and exit
2; the full traceback goes to a file the line names, for a bug report.

    @one_line("bitexact-server")
    def main(args=None) -> int: ...

The file is `$XDG_CACHE_HOME/bitexact/crash/<program>-<UTC time>-<pid>.txt` (`~/.cache` without it), or
the system's temporary directory where that cannot be written. SystemExit passes through (argparse's
usage errors are exit 2 already); Ctrl-C is exit 130 with one line.
"""

from __future__ import annotations

import functools
import os
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import ParamSpec

import exactformats

P = ParamSpec("P")
INTERRUPTED = 130


def _crash_dirs() -> list[Path]:
    base = str(exactformats.cache_home(os.environ))
    return [Path(base) / "bitexact" / "crash", Path(tempfile.gettempdir())]


def write_traceback(program: str, error: BaseException) -> str:
    """Where the traceback of `error` was written, or why it could not be."""
    text = "".join(traceback.format_exception(error))
    name = f"{program}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{os.getpid()}.txt"
    problems = []
    for folder in _crash_dirs():
        try:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text(f"{program} {' '.join(sys.argv[1:])}\n\n{text}")
            return str(folder / name)
        except OSError as fault:
            problems.append(f"{folder}: {fault.strerror or fault}")
    return f"nowhere ({'; '.join(problems)})"


def _where(error: BaseException) -> str:
    frames = traceback.extract_tb(error.__traceback__)
    if not frames:
        return ""
    last = frames[-1]
    return f" at {Path(last.filename).name}:{last.lineno}"


def report(program: str, error: BaseException) -> int:
    """Say, in one line on stderr, that `program` failed unexpectedly and where the traceback is; exit 2."""
    path = write_traceback(program, error)
    summary = " ".join(str(error).split())[:300] or "(no message)"
    print(
        f"{program}: internal error: {type(error).__name__}: {summary}{_where(error)}; "
        f"the full traceback is in {path} (please report it with the command line)",
        file=sys.stderr,
        flush=True,
    )
    return 2


def one_line(program: str) -> Callable[[Callable[P, int]], Callable[P, int]]:
    """Wrap a `main` so that nothing but SystemExit leaves it as a traceback."""

    def wrap(main: Callable[P, int]) -> Callable[P, int]:
        @functools.wraps(main)
        def guarded(*args: P.args, **kwargs: P.kwargs) -> int:
            try:
                return main(*args, **kwargs)
            except KeyboardInterrupt:
                print(f"{program}: interrupted (exit {INTERRUPTED})", file=sys.stderr, flush=True)
                return INTERRUPTED
            except Exception as error:  # the guard's whole job: every other error, told in one line
                return report(program, error)

        return guarded

    return wrap
