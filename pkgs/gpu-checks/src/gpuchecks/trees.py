"""The SGLang trees a run compares, and how each one's server starts.

A tree is a site-packages folder holding `sglang/`. `patched` (the series applied; its content manifest
written) is started through the launcher, whose exact-mode preflight must accept it. Any tree without the
manifest (`stock`, the released SGLang) is started with the argv and environment the launcher's
`--print` gives, run directly: the preflight rightly refuses such a tree and there is no bypass flag.

Two ways to reach the launcher, the same everywhere else:
- the flake's check names a launcher program per tree (the `bitexact-server` wrapper of that build);
- a GPU host without Nix runs `python -m exactlaunch.cli` with PYTHONPATH pointing at the tree and the
  assembled dependencies (`--deps`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import exactformats
from exactformats.recipe import thawed

MANIFEST = Path("sglang") / "srt" / "bitexact_manifest.json"
TREE_NAMES = ("patched", "stock")
PROG = "bitexact-gpu-checks"


class TreeError(ValueError):
    """A tree given to the runner cannot be used; the message names it and the fix."""


@dataclass(frozen=True)
class Tree:
    name: str
    site: Path
    launcher: tuple[str, ...] = ()  # a launcher program; empty: python -m exactlaunch.cli
    deps: tuple[Path, ...] = ()
    server_env: dict[str, str] = field(default_factory=dict)  # the host's settings beside the recipe's

    @property
    def has_series(self) -> bool:
        """The series' manifest is there: the launcher's preflight can accept it."""
        return (self.site / MANIFEST).is_file()

    def python_path(self) -> str:
        """The tree first (its sglang), then the dependencies, then what this process sees."""
        parts = [str(self.site), *map(str, self.deps)]
        inherited = os.environ.get("PYTHONPATH")
        return os.pathsep.join([*parts, inherited] if inherited else parts)

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        if not self.launcher:
            env["PYTHONPATH"] = self.python_path()
        env["PYTHONUNBUFFERED"] = "1"
        env.update(self.server_env)
        return env

    def launcher_argv(self, recipe: Path, variant: str, extra: list[str]) -> list[str]:
        base = list(self.launcher) or [sys.executable, "-m", "exactlaunch.cli"]
        return [*base, "--recipe", str(recipe), "--variant", variant, *extra]

    def server_command(self, recipe: Path, variant: str, port: int) -> tuple[list[str], dict[str, str]]:
        """(argv, env) of VARIANT's server on PORT: the launcher, or its printed argv run directly."""
        env = self.env()
        serving = ["--host", "127.0.0.1", "--port", str(port)]
        if self.has_series:
            return self.launcher_argv(recipe, variant, serving), env
        printed = subprocess.run(
            self.launcher_argv(recipe, variant, [*serving, "--print"]),
            env=env,
            capture_output=True,
            text=True,
        )
        if printed.returncode != 0:
            raise TreeError(
                f"the launcher's --print for the {self.name} tree's {variant} server failed: "
                f"{printed.stderr.strip()[-1500:]}"
            )
        plan = json.loads(printed.stdout)
        env.update(plan["env"])
        env.update(plan.get("driver", {}).get("env", {}))
        env.update(self.server_env)  # the host's settings win over nothing of the recipe's (checked below)
        return list(plan["argv"]), env

    def build_info(self, recipe: Path) -> str:
        """The launcher's account of the build (`--build-info`), for history lines and run records."""
        done = subprocess.run(
            self.launcher_argv(recipe, "recipe", ["--build-info"]),
            env=self.env(),
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise TreeError(f"--build-info for the {self.name} tree failed: {done.stderr.strip()[-1500:]}")
        return done.stdout


def check_site(name: str, site: Path) -> Path:
    """`site` holds an SGLang tree, or TreeError naming what to give."""
    if not (site / "sglang" / "srt").is_dir():
        raise TreeError(
            f"--tree {name}={site}: no sglang/srt there; give the site-packages folder that holds sglang/ "
            "(a GPU host: the patched/ and stock/ folders assemble.py builds)"
        )
    if name == "patched" and not (site / MANIFEST).is_file():
        raise TreeError(
            f"--tree patched={site}: no {MANIFEST} (the series' manifest): it is not a patched tree; the "
            "patched tree carries the manifest the series writes (exactlaunch.manifest)"
        )
    if name == "stock" and (site / MANIFEST).is_file():
        raise TreeError(f"--tree stock={site} carries the series' manifest: it is a patched tree, not stock")
    return site


def with_memory_fraction(recipe: Path, fraction: float, dest: Path) -> Path:
    """A copy of the recipe at `dest` whose `--mem-fraction-static` is `fraction`, for servers that share
    one card (SGLang sizes its pools from that share of the memory free at its start)."""
    return with_launch_value(recipe, "--mem-fraction-static", f"{fraction:g}", dest)


def with_launch_value(recipe: Path, flag: str, value: str, dest: Path) -> Path:
    """A copy of the recipe at `dest` whose launch argv gives `flag` the value `value` (a flag the recipe
    already sets: a host setting replaces, it never adds numerics). The copy keeps the recipe's name, so its
    goldens and references key as the recipe's do; an unchanged copy is not rewritten (a resumed run's
    identity holds)."""
    data = thawed(read_recipe(recipe).data)
    argv = data["launch"]["argv"]
    if flag not in argv:
        raise TreeError(f"recipe {recipe} sets no {flag} to replace")
    argv[argv.index(flag) + 1] = value
    dest.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(data, indent=2) + "\n"
    if not dest.exists() or dest.read_text() != text:
        dest.write_text(text)
    return dest


def recipe_setting(recipe: Path, env: dict[str, str]) -> list[str]:
    """The host settings that would override one of the recipe's own environment values (refused: the
    recipe's environment is numerics)."""
    ours = read_recipe(recipe).env
    return sorted(k for k in env if k in ours)


def read_recipe(recipe: Path) -> exactformats.Recipe:
    """The recipe at `recipe`, read by the reader bitexact, the launcher and pinlock share; TreeError naming
    the file and the fix."""
    try:
        return exactformats.read_recipe(
            recipe, what="--recipe", reader=PROG, older="use the GPU checks of the flake the recipe came with"
        )
    except exactformats.FormatError as error:
        raise TreeError(str(error)) from None
