"""Command line: `bitexact parity|repeat|golden record|golden check|bench|history|warm`.

Exit codes (docs/bitexact.md): 0 everything compared equal (bench/record: the run finished); 1 something
differs; 2 anything else (usage, engine failure, speculation that did not run, missing golden, crash);
130 when interrupted (SIGINT), with what finished kept for the rerun. Never a traceback on the terminal:
an error no check foresaw is named in one line, its traceback written to a file that line names."""

from __future__ import annotations

import argparse
import datetime
import os
import shlex
import sys
import tempfile
import traceback
from pathlib import Path

from bitexact import __version__, runs
from bitexact.argv import StrictParser
from bitexact.commands import bench, golden, history, parity, repeat, warm
from bitexact.engines.spec import parse_engine
from bitexact.errors import BitexactError
from bitexact.files import SHOWN, OutLock, describe_os_error, displayable, distinct_roles, prepare_out
from bitexact.helptext import HelpFormatter
from bitexact.ownership import take

EXIT_INTERRUPTED = 130  # 128 + SIGINT, the shell's convention


def build_parser() -> argparse.ArgumentParser:
    parser = StrictParser(
        prog="bitexact",
        formatter_class=HelpFormatter,
        epilog="""exit status:
  0    everything compared equal (bench, golden record: the run finished)
  1    something differs
  2    usage, engine or I/O error, speculation that did not run, a missing golden
  130  interrupted; finished results are kept: rerun the same command to resume

`bitexact VERB --help` shows each verb's options, defaults and examples, e.g.
  bitexact parity sglang+http://127.0.0.1:30000 sglang+http://127.0.0.1:30001""",
        description="Bit-exactness checks for inference engines. Engines: sglang+http://HOST:PORT, "
        "openai+http://HOST:PORT/v1?model=NAME, hf:PATH?device=cpu|cuda&batch=N&assistant=DRAFT_PATH, "
        "sglang-engine:PATH?server_arg=value",
    )
    parser.add_argument("--version", action="version", version=f"bitexact {__version__}")
    sub = parser.add_subparsers(
        dest="verb", required=True, metavar="{parity,repeat,golden,bench,history,warm}"
    )
    for module in (parity, repeat, golden, bench, history, warm):
        module.add_parser(sub)
    return parser


def crash_report(error: BaseException, out: Path | None, argv: list[str]) -> str:
    """Write the traceback of an error no check foresaw to a file (in --out where there is one, else the
    temporary directory) and say, in one line, what failed, where, and where the traceback is."""
    frames = traceback.extract_tb(error.__traceback__)
    where = f" in {Path(frames[-1].filename).name}:{frames[-1].lineno} ({frames[-1].name})" if frames else ""
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    text = "".join(traceback.format_exception(error))
    for folder in ([out] if out is not None and out.is_dir() else []) + [Path(tempfile.gettempdir())]:
        path = folder / f"bitexact-crash-{stamp}-{os.getpid()}.txt"
        try:
            if folder == out:
                take(path)  # bitexact's in --out (ownership.py), never a file of the user's
            path.write_text(  # a path or argument that is not UTF-8 is written escaped (files.SHOWN)
                f"bitexact {__version__}: {shlex.join(['bitexact', *argv])}\n{text}", "utf-8", SHOWN
            )
        except (OSError, BitexactError):
            continue
        return displayable(
            f"bitexact: internal error: {type(error).__name__}: {error}{where}; the traceback is in "
            f"{path.absolute()} (a bug in bitexact: please report it with that file) (exit 2)"
        )
    return displayable(f"bitexact: internal error: {type(error).__name__}: {error}{where} (exit 2)")


def shown_streams() -> None:
    """stdout and stderr write what they cannot encode escaped (files.SHOWN: a path's bytes that are not
    UTF-8 as `\\xNN`), so no line bitexact prints (a verdict, a note, a progress bar) fails on a path."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors=SHOWN)


def given_engines(args: argparse.Namespace) -> runs.Engines:
    """The command's engine strings (A and B, or its one engine), each parsed once: the verb, its --out
    key and its results file names all take these specs. A malformed string is a UsageError here."""
    given = {name: getattr(args, name, None) for name in runs.ENGINE_OPTIONS}
    return {name: parse_engine(raw) for name, raw in given.items() if isinstance(raw, str)}


def verb_of(args: argparse.Namespace) -> str:
    return runs.verb_of(args.verb, getattr(args, "golden_verb", None))


def command_of(args: argparse.Namespace, engines: runs.Engines, argv: list[str]) -> runs.Command:
    """The command as runs.py keys --out by it."""
    identity = runs.run_identity(vars(args), engines)
    return runs.Command(verb_of(args), identity, bool(getattr(args, "force", False)), tuple(argv))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    out: Path | None = None
    shown_streams()
    try:
        args = build_parser().parse_args(argv)  # usage errors exit 2 here (argparse's own convention)
        distinct_roles(vars(args))
        if not hasattr(args, "out"):
            return int(args.run(args, given_engines(args)))
        # The engine strings are parsed once, where --out's key first needs them: before a default --out
        # is named from it, else after the --out given is prepared (the order of errors as it always was).
        engines = None
        if args.out is None:
            engines = given_engines(args)
            args.out = runs.default_out(verb_of(args), runs.run_identity(vars(args), engines))
        out = Path(args.out)
        with OutLock(prepare_out(out)):
            engines = given_engines(args) if engines is None else engines
            runs.claim(out, command_of(args, engines, argv))
            return int(args.run(args, engines))
    except BitexactError as exc:
        print(displayable(f"bitexact: error: {exc}"), file=sys.stderr)
        return 2
    except OSError as exc:  # an I/O fault no check foresaw: named, without a traceback
        where = f"{exc.filename}: " if exc.filename else ""
        print(displayable(f"bitexact: error: {where}{describe_os_error(exc)}"), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("bitexact: interrupted (exit 130)", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:
        print(crash_report(exc, out, argv), file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
