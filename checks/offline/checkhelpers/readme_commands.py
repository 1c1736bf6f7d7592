"""The commands in a markdown file's code blocks, and what is wrong with each: a flake output or app that
does not exist, a CLI verb or flag our parsers refuse, a recipe variant the recipe lacks, an image name
the flake does not build, a program nobody ships. checks/offline/test_readme_commands.py runs it on
README.md.

Our CLIs are judged by their own parsers (bitexact, bitexact-server, pinlock, bitexact-driver, the image
entrypoint), Nix's subcommands and flags by the installed Nix's `--help`, flake outputs by names the
test evaluates from the flake. Other programs (git, docker, pip, ...) are accepted by name, and only the
arguments that name something of ours are checked (the image, the paths, the entrypoint's options).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from checkhelpers.repo import REPO

SYSTEM = "x86_64-linux"
DEFAULT_RECIPE = "nix/recipes/qwen3.8-27b-exact.json"

# nix2container's image passthru (nlewo/nix2container@20d3395 default.nix, `buildImage`'s `passthru`):
# the attributes `nix run .#image.X` can name.
IMAGE_PASSTHRU = {"copyToDockerDaemon", "copyToRegistry", "copyToPodman", "copyTo", "imageRefUnsafe"}

# Programs whose arguments are not ours: accepted by name (a typo in the name is still caught).
FOREIGN = {"git", "docker", "python3", "python", "pip", ".venv/bin/pip", "cd", "export", ".", "source"}

SEPARATORS = {";", "&&", "||", "|", "&", "(", ")"}
SHELL_FENCES = {"", "sh", "bash", "shell", "console"}


@dataclass
class Flake:
    """What the flake offers: output names per kind, the image reference, the recipe file."""

    packages: set[str]
    apps: set[str]
    checks: set[str]
    image_refs: set[str]
    recipe: Path = REPO / DEFAULT_RECIPE
    archives: set[str] = field(default_factory=set)  # docker-archive files written so far


def code_lines(markdown: str) -> Iterator[tuple[int, str]]:
    """(line number, text) of every shell line in the code blocks, continuations joined. Indented blocks
    are shell; a fenced block is shell unless it names another language (```nix, ```ini: configuration
    to read, not commands to run). Indented text inside list items is taken for code too: the guide puts
    none there."""
    fenced = in_block = False
    shell = True
    previous_blank = True
    pending: tuple[int, str] | None = None
    for number, line in enumerate(markdown.splitlines(), 1):
        blank = not line.strip()
        text = None
        if line.lstrip().startswith("```"):
            fenced = not fenced
            shell = line.strip()[3:].strip() in SHELL_FENCES
        elif fenced:
            text = line if shell else None
        elif line.startswith("    ") and (in_block or previous_blank):
            in_block, text = True, line[4:]
        elif not blank:
            in_block = False
        previous_blank = blank
        if text is None or not text.strip():
            continue
        if pending:
            number, text = pending[0], pending[1] + " " + text.strip()
            pending = None
        if text.rstrip().endswith("\\"):
            pending = (number, text.rstrip()[:-1])
            continue
        yield number, text


def without_comment(text: str) -> str:
    """The line up to a `#` that starts a shell comment (at the start or after whitespace, unquoted)."""
    quote = ""
    for i, char in enumerate(text):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or text[i - 1].isspace()):
            return text[:i]
    return text


def simple_commands(text: str) -> list[list[str]]:
    """The simple commands of a shell line: split at ;, &&, ||, |, &, ( and ), with leading VAR=value
    assignments dropped."""
    lexer = shlex.shlex(without_comment(text), posix=True, punctuation_chars=";&|()")
    lexer.whitespace_split = True
    lexer.commenters = ""
    out: list[list[str]] = [[]]
    for token in lexer:
        if token in SEPARATORS or set(token) <= set(";&|()"):
            out.append([])
        elif token != "$":  # the `$` of a `$(...)` substitution
            out[-1].append(token)
    commands = []
    for words in out:
        while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0]):
            words = words[1:]
        if words:
            commands.append(words)
    return commands


def _argparse_problem(parse: Callable[[], object]) -> str | None:
    """Run an argparse parse; its usage error (it exits 2) as text, or None."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            parse()
    except SystemExit as stop:
        if stop.code not in (0, None):
            return err.getvalue().strip().splitlines()[-1] if err.getvalue().strip() else f"exit {stop.code}"
    return None


def _variant_problem(recipe: Path, name: str) -> str | None:
    from exactlaunch.recipe import RecipeError, load_recipe, variant_named

    try:
        variant_named(load_recipe(recipe), name)
    except RecipeError as error:
        return str(error)
    return None


def _path_problem(path: str, what: str) -> str | None:
    return None if (REPO / path).exists() else f"{what} {path} does not exist in the repository"


def check_bitexact(args: list[str], flake: Flake) -> list[str]:
    from bitexact.cli import build_parser
    from bitexact.engines.spec import parse_engine
    from bitexact.errors import UsageError

    problems: list[str] = []  # the parser itself refuses an option given twice or abbreviated
    # A placeholder (`<card>`) stands for the reader's own value: parsed as one that is valid.
    args = ["placeholder" if re.fullmatch(r"<[a-z_-]+>", a) else a for a in args]
    parsed: list[argparse.Namespace] = []
    problem = _argparse_problem(lambda: parsed.append(build_parser().parse_args(args)))
    if problem:
        return [*problems, problem]
    options = parsed[0]
    for name in ("engine", "a", "b"):
        raw = getattr(options, name, None)
        if raw is not None:
            try:
                parse_engine(raw)
            except UsageError as error:
                problems.append(str(error))
    recipe = getattr(options, "recipe", None)
    if recipe and not recipe.startswith("$"):
        problems += filter(None, [_path_problem(recipe, "recipe")])
    recipe_path = REPO / recipe if recipe and (REPO / recipe).is_file() else flake.recipe
    if getattr(options, "variant", None):
        problems += filter(None, [_variant_problem(recipe_path, options.variant)])
    preset = getattr(options, "preset", None)
    if preset and preset != "long":
        problems += filter(None, [_variant_problem(recipe_path, preset)])
    return problems


def check_server(args: list[str], flake: Flake) -> list[str]:
    from exactlaunch.cli import _extra_problem, _parser

    parser = _parser()
    result: list[tuple[argparse.Namespace, list[str]]] = []
    problem = _argparse_problem(lambda: result.append(parser.parse_known_args(args)))
    if problem:
        return [problem]
    options, extra = result[0]
    problem = _extra_problem(parser, args, extra)
    if problem:
        return [problem]
    recipe = str(options.recipe) if options.recipe else None
    if recipe and not (REPO / recipe).is_file():
        return [f"recipe {recipe} does not exist in the repository"]
    return list(filter(None, [_variant_problem(REPO / recipe if recipe else flake.recipe, options.variant)]))


def check_pinlock(args: list[str], flake: Flake) -> list[str]:
    from pinlock.cli import _parser

    return list(filter(None, [_argparse_problem(lambda: _parser().parse_args(args))]))


def check_driver(args: list[str], flake: Flake) -> list[str]:
    from gpuhost.cli import usage_problem

    return list(filter(None, [usage_problem(args)]))


def check_entrypoint(args: list[str], flake: Flake) -> list[str]:
    from image_entrypoint.main import _parser

    parsed: list[argparse.Namespace] = []
    problem = _argparse_problem(lambda: parsed.append(_parser().parse_args(args)))
    if problem:
        return [problem]
    return list(filter(None, [_variant_problem(flake.recipe, parsed[0].variant)]))


def check_record_golden(args: list[str], flake: Flake) -> list[str]:
    # The app runs `bitexact golden record URL --recipe ... --variant recipe ... "$@"`
    # (nix/gpu-checks-build.nix): its arguments are golden record's options.
    return check_bitexact(["golden", "record", "sglang+http://127.0.0.1:30000", *args], flake)


# `nix run .#APP -- ARGS`: who receives ARGS.
APP_ARGS: dict[str, Callable[[list[str], Flake], list[str]]] = {
    "server": check_server,
    "lock": check_pinlock,
    "record-golden": check_record_golden,
    "bitexact": check_bitexact,
}

# Executables our packages put on PATH, and who parses their arguments.
PROGRAMS: dict[str, Callable[[list[str], Flake], list[str]]] = {
    "bitexact": check_bitexact,
    "bitexact-server": check_server,
    "pinlock": check_pinlock,
    "bitexact-driver": check_driver,
    "bitexact-entrypoint": check_entrypoint,
}


@cache
def nix_help(subcommand: tuple[str, ...]) -> str | None:
    """The installed Nix's help for a subcommand, or None when Nix has no such subcommand."""
    done = subprocess.run(
        ["nix", "--extra-experimental-features", "nix-command flakes", *subcommand, "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin:/usr/local/bin", "PAGER": "cat", "HOME": "/tmp"},
    )
    return done.stdout if done.returncode == 0 else None


def check_installable(kind: str, ref: str, flake: Flake) -> tuple[str | None, str | None]:
    """(problem, the app or package named) for `.#NAME[.ATTR...]` used by `nix KIND`."""
    if not ref.startswith(".#"):
        return None, None
    path = ref[2:].split(".")
    head = path[0]
    if head in ("packages", "apps", "checks", "devShells", "legacyPackages"):
        names = {"packages": flake.packages, "apps": flake.apps, "checks": flake.checks}.get(head)
        if len(path) < 3 or path[1] != SYSTEM or (names is not None and path[2] not in names):
            return f"{ref}: no such flake output", None
        return None, path[2]
    found = flake.packages | (flake.apps if kind == "run" else set())
    if head not in found:
        return f"{ref}: the flake has no {'app or package' if kind == 'run' else 'package'} {head!r}", None
    if path[1:] and not (head.startswith("image") and path[1] in IMAGE_PASSTHRU and len(path) == 2):
        return f"{ref}: {head} has no attribute {'.'.join(path[1:])!r} that this check knows", None
    return None, ".".join(path)


def check_nix(args: list[str], flake: Flake) -> list[str]:
    words = [a for a in args if not a.startswith("-")]
    sub = tuple(words[:2]) if words[:1] in (["flake"], ["store"], ["key"]) else tuple(words[:1])
    help_text = nix_help(sub)
    if help_text is None:
        return [f"nix {' '.join(sub)}: not a subcommand of the installed Nix"]
    cut = args.index("--") if "--" in args else len(args)
    before, after = args[:cut], args[cut + 1 :]
    problems = []
    for flag in before:
        name = flag.split("=", 1)[0]
        if name.startswith("-") and not re.search(rf"(^|[\s,]){re.escape(name)}([\s,=]|$)", help_text, re.M):
            problems.append(f"nix {' '.join(sub)}: the installed Nix documents no option {name}")
    named = []
    for word in before:
        if word.startswith(".#"):
            problem, target = check_installable(sub[0], word, flake)
            if problem:
                problems.append(problem)
            named.append(target)
    if sub == ("run",) and named and named[0]:
        target = named[0]
        if target in APP_ARGS:
            problems += APP_ARGS[target](after, flake)
        elif target == "image.copyTo":
            problems += check_image_destination(after, flake)
    return problems


def check_image_destination(args: list[str], flake: Flake) -> list[str]:
    """`copyTo DEST`: a docker-archive destination must carry the flake's image reference."""
    if len(args) != 1:
        return [f"image.copyTo takes one destination, got {args}"]
    match = re.fullmatch(r"docker-archive:([^:]+):(.+)", args[0])
    if match:
        flake.archives.add(match.group(1))
        if match.group(2) not in flake.image_refs:
            return [f"{args[0]}: the flake's image is {sorted(flake.image_refs)}"]
    return []


def check_docker(args: list[str], flake: Flake) -> list[str]:
    if args[:1] == ["load"]:
        archive = args[args.index("-i") + 1] if "-i" in args[:-1] else None
        if archive and archive not in flake.archives:
            return [f"docker load -i {archive}: no earlier command writes that archive"]
        return []
    if args[:1] == ["run"]:
        images = [i for i, a in enumerate(args) if re.fullmatch(r"bitexact-sglang(-dev)?:\S+", a)]
        if not images:
            return ["docker run: no bitexact-sglang image named"]
        image = args[images[0]]
        if image not in flake.image_refs:
            return [f"docker run {image}: the flake's images are {sorted(flake.image_refs)}"]
        return check_entrypoint(args[images[0] + 1 :], flake)
    return []


def check_pip(args: list[str], flake: Flake) -> list[str]:
    problems = []
    for arg in args[1:] if args[:1] == ["install"] else []:
        if arg.startswith("./"):
            project = arg.split("[", 1)[0]
            if not (REPO / project / "pyproject.toml").is_file():
                problems.append(f"pip install {arg}: no Python project at {project}")
    return problems


def check_command(words: list[str], flake: Flake) -> list[str]:
    program, args = words[0], words[1:]
    if program == "nix":
        return check_nix(args, flake)
    if program in PROGRAMS:
        return PROGRAMS[program](args, flake)
    if program == "bash":
        return [] if args and (REPO / args[0]).is_file() else [f"bash {' '.join(args)}: no such script"]
    if program == "docker":
        return check_docker(args, flake)
    if program in ("pip", ".venv/bin/pip"):
        return check_pip(args, flake)
    if program in FOREIGN:
        return []
    return [f"{program}: not a program this repository or its guide provides"]


def problems_in(markdown: str, flake: Flake) -> list[str]:
    """Every problem of every command in the code blocks, as `line N: command: problem`."""
    out = []
    for number, text in code_lines(markdown):
        for words in simple_commands(text):
            for problem in check_command(words, flake):
                out.append(f"line {number}: {' '.join(words)}: {problem}")
    return out
