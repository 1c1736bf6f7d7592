"""`pinlock` (`nix run .#lock`): fill the pins that need a network, or report which are absent.

Exit status: 0 done (or, for `status`, everything pinned); 1 something is absent, malformed or failed to
pin (the failed steps are named; finished pins are kept); 2 a usage error (a bad argument, an option given
twice, a missing path, a --snapshot of another repo or revision, no checkout, a recipe missing a field or
giving it the wrong type, a pin the recipe would lose) or an unexpected error (one line naming the file
its traceback was written to)."""

from __future__ import annotations

import argparse
import difflib
import functools
import os
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path

import exactformats

from pinlock import commands, hf, snapshot
from pinlock.hf import ManifestError
from pinlock.nar import nar_sha256, nix32, sri
from pinlock.net import NetError
from pinlock.pins import PinError, UsageError, find_root, folder_problem, is_sri, write_problem
from pinlock.unpack import UnpackError

FAILURES = (PinError, NetError, ManifestError, UnpackError, ValueError, OSError)


def _default_cache() -> Path:
    base = str(exactformats.cache_home(os.environ))
    return Path(base) / "bitexact" / "pinlock"


def _repo_at_rev(text: str) -> tuple[str, str | None]:
    repo, _, rev = text.partition("@")
    problem = hf.revision_problem(rev) if rev else None
    if problem:
        raise UsageError(f"{text}: give the commit as ORG/NAME@REV: {problem}")
    try:
        return hf.check_repo(repo), (rev or None)
    except ManifestError as error:
        raise UsageError(str(error)) from None


def _assignment(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not value.startswith("sha256-"):
        raise argparse.ArgumentTypeError(f"expected NAME-VERSION=sha256-..., got {text!r}")
    if not is_sri(value):  # it becomes a pin as given: a hash Nix would refuse reads as pinned until then
        raise argparse.ArgumentTypeError(
            f"{text!r}: {value!r} is not an SRI sha256 (sha256- and 44 base64 characters, as "
            "`nix hash to-sri` prints it)"
        )
    return key, value


def _add_common(parser: argparse.ArgumentParser, default: object) -> None:
    parser.add_argument(
        "--root",
        type=Path,
        default=default,
        help="the flake checkout (default: found from the working directory)",
    )
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=default,
        help="downloads (default: $XDG_CACHE_HOME/bitexact/pinlock)",
    )
    parser.add_argument(
        "--recipe",
        type=Path,
        default=default,
        help="recipe JSON (default: nix/recipes/qwen3.8-27b-exact.json)",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        default=False if default is None else default,
        help="recompute pins that are already present",
    )


# Options that take a value: each given at most once (argparse would let the last one win silently).
VALUE_OPTIONS = ("--root", "--cache-dir", "--recipe", "--cargo-dir", "--snapshot", "--python")


def _options(argv: Sequence[str]) -> list[str]:
    words = list(argv[: argv.index("--")] if "--" in argv else argv)
    return [w.split("=", 1)[0] for w in words if w.startswith("--") and w != "--"]


def _repeated(argv: Sequence[str]) -> list[str]:
    names = _options(argv)
    return sorted({n for n in names if n in VALUE_OPTIONS and names.count(n) > 1})


def _unknown_option(parser: argparse.ArgumentParser, argv: Sequence[str]) -> str | None:
    """The first option no command has, named with the closest one (argparse, with subcommands, would
    take the option's value for the command and say that instead)."""
    known = {o for a in parser._actions for o in a.option_strings}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                known |= {o for a in sub._actions for o in a.option_strings}
    for name in _options(argv):
        if name not in known:
            close = difflib.get_close_matches(name, sorted(known), n=1)
            return f"unknown option {name}" + (f": did you mean {close[0]}?" if close else "")
    return None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pinlock",
        allow_abbrev=False,  # `--rec` never silently means `--recipe`
        description="Fill the pins of the bit-exact SGLang flake that need a network: the SGLang source "
        "narHash (nix/pins/sglang-src.json), its Cargo.lock files and their git dependency hashes "
        "(nix/pins/sglang-cargo-locks/, nix/pins/sglang-cargo.json), "
        "the real wheels behind wheel-stub sdists (nix/pins/wheel-stubs.json), Hugging Face weight manifests "
        "(pkgs/weights/manifests/) and the uv lock (pkgs/server-env/uv.lock). "
        "Finished pins are skipped; commit nix/pins/ and pkgs/weights/manifests/ afterwards.",
        epilog="Exit status: 0 done (status: everything pinned); 1 something absent, malformed or failed "
        "to pin; 2 usage error.",
    )
    _add_common(parser, default=None)
    # The same options after the command (`pinlock weights --force`): SUPPRESS keeps the values
    # given before it unless the command's own are given.
    common = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    _add_common(common, default=argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    add = functools.partial(sub.add_parser, parents=[common], allow_abbrev=False)
    add("all", help="everything still absent (the default)")
    add("src", help="narHash of the SGLang source at the pinned rev")
    cargo = add("cargo", help="SGLang's Cargo.lock files and the outputHashes of their git dependencies")
    cargo.add_argument(
        "--cargo-dir", default="rust", help="directory of the Cargo workspaces (default: rust)"
    )
    cargo.add_argument(
        "--set", type=_assignment, action="append", default=[], metavar="NAME-VERSION=HASH",
        help="a hash computed elsewhere (e.g. nix-prefetch-git) for a dependency a tarball cannot give",
    )  # fmt: skip
    weights = add("weights", help="weights manifests (default: the recipe's model and drafter)")
    weights.add_argument(
        "repos", nargs="*", metavar="ORG/NAME@REV", help="repos to pin instead of the recipe's"
    )
    weights.add_argument(
        "--snapshot",
        type=Path,
        help="pin from a local Hugging Face hub cache instead of the Hub: the cache, a models--ORG--NAME "
        "folder in it or one of its snapshots/REV (every file is verified against its blob's name)",
    )
    wheel_stubs = add(
        "wheel-stubs", help="real wheels behind sdist-only wheel-stub packages of uv.lock (e.g. cuda-tile)"
    )
    wheel_stubs.add_argument("--python", default="cp312", help="the Nix interpreter's tag (default: cp312)")
    uv = add("uv", help="refresh pkgs/server-env/uv.lock with uv")
    uv.add_argument("--upgrade", action="store_true", help="re-resolve every package (within exclude-newer)")
    add("status", help="list present and absent pins; exit 1 when any is absent")
    hash_path = add("hash-path", help="NAR hash of a local path, as `nix hash path` prints it")
    hash_path.add_argument("path", type=Path)
    hash_path.add_argument("--base32", action="store_true", help="Nix base32 instead of SRI")
    return parser


Target = tuple[str, str, "snapshot.Located | None"]


def _weights_targets(ctx: commands.Context, repos: list[str], path: Path | None) -> list[Target]:
    """(repo, revision, located snapshot or None) for each repo to pin; UsageError when they cannot be."""
    if not repos:
        if path is not None:
            raise UsageError(
                "--snapshot needs the repo it holds: pinlock weights ORG/NAME[@REV] --snapshot DIR"
            )
        return [(repo, rev, None) for repo, rev in commands.recipe_repos(ctx)]
    if path is not None and len(repos) != 1:
        raise UsageError("--snapshot takes exactly one ORG/NAME[@REV]")
    targets: list[Target] = []
    for text in repos:
        repo, rev = _repo_at_rev(text)
        if path is not None:
            located = snapshot.locate(path, repo, rev)
            targets.append((repo, located.commit, located))
        elif rev is None:
            raise UsageError(f"{text}: give the commit as ORG/NAME@REV (40 lower-case hex digits)")
        else:
            targets.append((repo, rev, None))
    return targets


def _run_steps(steps: list[tuple[str, Callable[[], None]]]) -> int:
    failed, usage = [], False
    for name, step in steps:
        try:
            step()
        except FAILURES as error:
            print(f"pinlock: error: {name}: {_described(error)}", file=sys.stderr)
            failed.append(name)
            usage = usage or isinstance(error, UsageError)
    if failed:
        print(
            f"pinlock: {len(failed)} step(s) failed: {', '.join(failed)}; finished pins were kept",
            file=sys.stderr,
        )
        return 2 if usage else 1
    return 0


def _described(error: BaseException) -> str:
    """An error as a step's line says it: an OSError that got this far names its file and, for a fault a
    user can fix (a full disk), how; the others say themselves."""
    if isinstance(error, OSError) and error.filename is not None and error.strerror:
        return write_problem(error, Path(os.fsdecode(error.filename)))
    return str(error)


def _visible(text: str) -> str:
    """One line, with control characters shown as escapes: a pin value ending in a carriage return
    would otherwise print as the value that looks right, or as two lines."""
    return "".join(c if c.isprintable() or c == " " else repr(c)[1:-1] for c in text)


def _error(error: BaseException) -> int:
    print(f"pinlock: error: {_visible(str(error))}", file=sys.stderr)
    return 2 if isinstance(error, UsageError) else 1


def _report_crash(error: Exception) -> int:
    """An unexpected error: one line on stderr, the traceback in a file (pinlock runs on nixpkgs' Python,
    apart from the launcher and exactformats.crash, so it writes its own, in the same folder)."""
    name = f"pinlock-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{os.getpid()}.txt"
    written = "nowhere (no folder could be written)"
    for folder in (_default_cache().parent / "crash", Path(tempfile.gettempdir())):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text("".join(traceback.format_exception(error)))
        except OSError:
            continue
        written = str(folder / name)
        break
    frame = traceback.extract_tb(error.__traceback__)[-1:]
    where = f" at {Path(frame[0].filename).name}:{frame[0].lineno}" if frame else ""
    summary = " ".join(str(error).split())[:300] or "(no message)"
    print(
        f"pinlock: internal error: {type(error).__name__}: {summary}{where}; the full traceback is in "
        f"{written} (please report it with the command line)",
        file=sys.stderr,
    )
    return 2


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(sys.argv[1:] if argv is None else list(argv))
    except KeyboardInterrupt:
        print("pinlock: interrupted (exit 130); finished pins were kept", file=sys.stderr)
        return 130
    except Exception as error:  # nothing but SystemExit leaves as a traceback
        return _report_crash(error)


def _main(argv: list[str]) -> int:
    parser = _parser()
    twice, unknown = _repeated(argv), _unknown_option(parser, argv)
    if unknown:
        parser.error(f"{unknown} (abbreviations are not taken)")  # exits 2
    if twice:
        parser.error(f"{', '.join(twice)} given more than once; give each option once")
    options = parser.parse_args(argv)
    if options.command == "hash-path":
        if not options.path.exists() and not options.path.is_symlink():
            return _error(UsageError(f"{options.path} does not exist"))
        try:
            digest = nar_sha256(options.path)
        except FAILURES as error:  # a path that cannot be read, or one a NAR cannot hold: a bad argument
            return _error(UsageError(f"hash-path {options.path}: {error}"))
        print(nix32(digest) if options.base32 else sri(digest))
        return 0
    if options.root is not None and not options.root.is_dir():
        what = "does not exist" if not options.root.exists() else "is not a directory"
        return _error(UsageError(f"--root {options.root} {what}: give the flake's checkout"))
    try:
        root = (options.root or find_root(Path.cwd())).resolve()
    except PinError as error:
        return _error(UsageError(str(error)))
    ctx = commands.Context(
        root=root,
        cache=options.cache_dir or _default_cache(),
        force=options.force,
        recipe_path=options.recipe,
    )
    command = options.command or "all"
    if command == "status":
        try:
            rows = commands.status(ctx)
        except FAILURES as error:
            return _error(error)
        for what, state, why in rows:
            line = f"{state}  {what}" + (f": {why}" if why and state != "pinned" else "")
            print(_visible(line))
        return 0 if all(state == "pinned" for _, state, _ in rows) else 1
    if command == "uv":
        return _run_steps([("uv", lambda: commands.lock_uv(ctx, options.upgrade))])
    cache_problem = folder_problem(ctx.cache)
    if cache_problem:
        default = "the download cache ($XDG_CACHE_HOME/bitexact/pinlock)"
        given = "--cache-dir" if options.cache_dir else default
        return _error(UsageError(f"{given}: {cache_problem}; give a folder (it is made if absent)"))
    with commands.workspace(ctx):
        steps: list[tuple[str, Callable[[], None]]] = []
        if command in ("all", "src"):
            steps.append(("src", lambda: commands.lock_src(ctx)))
        if command in ("all", "cargo"):
            manual = dict(getattr(options, "set", []))
            cargo_dir = getattr(options, "cargo_dir", "rust")
            steps.append(("cargo", lambda: commands.lock_cargo(ctx, cargo_dir, manual)))
        if command in ("all", "wheel-stubs"):
            python = getattr(options, "python", "cp312")
            steps.append(("wheel-stubs", lambda: commands.lock_wheel_stubs(ctx, python)))
        if command in ("all", "weights"):
            try:
                targets = _weights_targets(
                    ctx, getattr(options, "repos", []), getattr(options, "snapshot", None)
                )
            except FAILURES as error:
                return _error(error)
            for repo, rev, located in targets:
                step = functools.partial(commands.lock_weights, ctx, repo, rev, located)
                steps.append((f"weights {repo}", step))
        if command == "all":
            steps.append(("uv", lambda: commands.lock_uv(ctx)))
        return _run_steps(steps)


if __name__ == "__main__":
    sys.exit(main())
