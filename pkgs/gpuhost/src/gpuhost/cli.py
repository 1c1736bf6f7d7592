"""`bitexact-driver`: show the NVIDIA driver and cards this machine offers, or run a command with the
driver on its library path (what the GPU checks' builders do before starting torch or triton).

    bitexact-driver [show] [--json]     what was found: the driver directory, the variables, each card
    bitexact-driver exec CMD [ARG...]   exec CMD with LD_LIBRARY_PATH and TRITON_LIBCUDA_PATH set
Exit 2, with the fix, when no driver is found (or a card cannot be read, for `show`).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence

from exactformats.crash import one_line

from gpuhost.cards import slug_for
from gpuhost.driver import DriverNotFound, driver_environment, find_driver
from gpuhost.nvml import NvmlError, read_cards

PROG = "bitexact-driver"


def _fail(message: str) -> int:
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return 2


def show(as_json: bool) -> int:
    try:
        libs = find_driver()
        env, notes = driver_environment(libs, os.environ)
        cards = read_cards(libs)
    except (DriverNotFound, NvmlError) as error:
        return _fail(str(error))
    for note in notes:
        print(f"{PROG}: note: {note}", file=sys.stderr)
    summary = {
        "driver": libs.to_json(),
        "environment": env,
        "cards": [{**card.to_json(), "slug": slug_for(card)} for card in cards],
    }
    if as_json:
        print(json.dumps(summary, indent=2))
        return 0
    print(f"driver: {libs.found_in} ({libs.origin}); on the library path as {libs.directory}")
    for key, value in env.items():
        print(f"  {key}={value}")
    for card in cards:
        print(f"card: {card.describe()}, driver {card.driver_version}, CUDA {card.cuda_driver_version}")
        print(f"  slug: {slug_for(card)}")
    return 0


def run(command: Sequence[str]) -> int:
    if not command:
        return _fail("exec needs a command")
    try:
        libs = find_driver()
    except DriverNotFound as error:
        return _fail(str(error))
    env, notes = driver_environment(libs, os.environ)
    for note in notes:
        print(f"{PROG}: note: {note}", file=sys.stderr)
    sys.stderr.flush()
    try:
        os.execvpe(command[0], list(command), {**os.environ, **env})
    except OSError as error:
        return _fail(f"cannot run {command[0]}: {error.strerror}")


def usage_problem(argv: Sequence[str]) -> str | None:
    """What is wrong with a command line, or None when it is one of the forms above (the docs test checks
    README's calls with it)."""
    argv = list(argv)
    if argv[:1] in (["-h"], ["--help"]):
        return None
    if argv[:1] == ["exec"]:
        return None if argv[1:] else "exec needs a command"
    rest = argv[1:] if argv[:1] == ["show"] else argv
    if rest not in ([], ["--json"]):
        return f"usage: {PROG} [show] [--json] | {PROG} exec CMD [ARG...]; got {' '.join(argv)}"
    return None


@one_line(PROG)
def main(args: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if args is None else args)
    problem = usage_problem(argv)
    if problem:
        return _fail(problem)
    if argv[:1] in (["-h"], ["--help"]):
        print(__doc__)
        return 0
    if argv[:1] == ["exec"]:
        return run(argv[1:])
    return show(argv[-1:] == ["--json"])


if __name__ == "__main__":
    sys.exit(main())
