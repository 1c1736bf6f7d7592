"""Command line: `bitexact parity|repeat|golden record|golden check|bench|history|warm`.

Exit codes (docs/bitexact.md): 0 everything compared equal (bench/record: the run finished); 1 something
differs; 2 anything else (usage, engine failure, speculation that did not run, missing golden, crash);
130 when interrupted (SIGINT), with what finished kept for the rerun."""

from __future__ import annotations

import argparse
import sys
import traceback

from bitexact import __version__
from bitexact.commands import bench, golden, history, parity, repeat, warm
from bitexact.errors import BitexactError
from bitexact.files import OutLock, describe_os_error, prepare_out
from bitexact.helptext import HelpFormatter

EXIT_INTERRUPTED = 130  # 128 + SIGINT, the shell's convention


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
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


def repeated_options(argv: list[str]) -> list[str]:
    """Options given more than once (argparse would let the last one win silently)."""
    seen: set[str] = set()
    twice: list[str] = []
    for token in argv:
        if token == "--":
            break
        if token.startswith("--"):
            name = token.split("=", 1)[0]
            if name in seen and name not in twice:
                twice.append(name)
            seen.add(name)
    return twice


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    twice = repeated_options(argv)
    if twice:
        parser.error(f"{', '.join(twice)} given more than once; give each option once")  # exits 2
    args = parser.parse_args(argv)  # usage errors exit 2 here (argparse's own convention)
    try:
        out = getattr(args, "out", None)
        if out is None:
            return int(args.run(args))
        with OutLock(prepare_out(out)):
            return int(args.run(args))
    except BitexactError as exc:
        print(f"bitexact: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # an I/O fault no check foresaw: named, without a traceback
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"bitexact: error: {where}{describe_os_error(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("bitexact: interrupted (exit 130)", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception:
        traceback.print_exc()
        print("bitexact: internal error (exit 2)", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
