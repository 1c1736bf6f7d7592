"""A command-line tool's main() run in this process, its output captured: for tests that call a CLI
many times (fuzzers) where a subprocess each would be too slow."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable


def run_main(main: Callable[[list[str]], int], args: list[str]) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of main(args); a SystemExit (argparse's usage errors) gives its code."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(args)
        except SystemExit as leave:
            code = leave.code if isinstance(leave.code, int) else 2
    return code, out.getvalue(), err.getvalue()
