"""`bitexact-entrypoint`: the image's entrypoint. Preflight, then exec bitexact-server on 0.0.0.0.

Preflight, in order, each failure a one-paragraph message and exit 2:
  1. GPU visible (the driver's libraries found, NVML lists the cards, libcuda loads) and every card is
     the recipe's card by the card table (docs/cards.md); no host binary is run;
  2. the repos the variant's argv names (--model-path, --speculative-draft-model-path) resolve offline
     in the hub cache to the recipe's revisions, every manifest file present with its size;
  3. the JIT cache volume is writable (else every start recompiles, or the start fails);
  4. exact mode: the installed SGLang carries the recipe's patch series and DeepGEMM its fence
     (exactlaunch.preflight, the launcher's own check).
Every external input comes from the environment the image sets, so a test drives the same code.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from exactformats.crash import one_line
from exactlaunch import values
from exactlaunch.options import Once, strict_parser, typed
from exactlaunch.preflight import PreflightFailure
from exactlaunch.preflight import preflight as engine_preflight
from exactlaunch.recipe import Recipe, RecipeError, apply_variant, load_recipe, variant_named
from gpuhost.cards import rows_with_slug

from image_entrypoint.checks import PreflightError
from image_entrypoint.gpu import Card, check_card, check_driver_library, find_gpus
from image_entrypoint.weights import RepoWeights, check_weights, load_spec

PROG = "bitexact-entrypoint"
EXACT_FLAG = "--enable-deterministic-inference"
REPO_FLAGS = ("--model-path", "--speculative-draft-model-path")
DEFAULT_PORT = "30000"


@dataclass(frozen=True)
class Settings:
    """What the image's environment tells the entrypoint (names as set in images/image.nix)."""

    recipe: Path
    hub_cache: Path | None
    weights_spec: Path | None
    cache_volume: Path | None
    allow_other_card: bool
    home: Path | None = None
    # The environment driver discovery reads (BITEXACT_DRIVER_LIB, LD_LIBRARY_PATH).
    environ: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        if not env.get("BITEXACT_RECIPE"):
            raise PreflightError("BITEXACT_RECIPE is unset: the image sets it; run the image's entrypoint")
        for var in ("BITEXACT_RECIPE", "BITEXACT_HF_HUB_CACHE", "HF_HUB_CACHE", "BITEXACT_WEIGHTS_SPEC"):
            try:
                values.path_text(env.get(var) or "")
            except values.BadValue as error:
                raise PreflightError(f"{var}: {error}") from None
        cache = env.get("BITEXACT_HF_HUB_CACHE") or env.get("HF_HUB_CACHE")
        return cls(
            recipe=Path(env["BITEXACT_RECIPE"]),
            hub_cache=Path(cache) if cache else None,
            weights_spec=Path(env["BITEXACT_WEIGHTS_SPEC"]) if env.get("BITEXACT_WEIGHTS_SPEC") else None,
            cache_volume=Path(env["BITEXACT_JIT_CACHE"]) if env.get("BITEXACT_JIT_CACHE") else None,
            allow_other_card=env.get("BITEXACT_ALLOW_OTHER_CARD") == "1",
            home=Path(env["HOME"]) if env.get("HOME") else None,
            environ=dict(env),
        )


def card_of(raw: Mapping[str, object], where: Path) -> Card:
    card = raw.get("card")
    if not isinstance(card, Mapping) or not all(
        isinstance(card.get(k), str) for k in ("slug", "name", "computeCapability")
    ):
        raise PreflightError(f"{where}: `card` needs string slug, name and computeCapability")
    if not rows_with_slug(card["slug"]):
        raise PreflightError(
            f"{where}: card.slug {card['slug']!r} is not in the card table "
            "(pkgs/gpuhost/src/gpuhost/cards.json, docs/cards.md)"
        )
    return Card(slug=card["slug"], name=card["name"])


def repos_named(argv: Sequence[str]) -> list[str]:
    """The HF repos the final argv loads (values of --model-path / --speculative-draft-model-path)."""
    return [argv[i + 1] for i, item in enumerate(argv[:-1]) if item in REPO_FLAGS]


def expected_weights(
    raw: Mapping[str, object], spec: list[RepoWeights] | None, repos: Sequence[str]
) -> list[RepoWeights]:
    """The RepoWeights to check for `repos`: from the baked spec when there is one, else the recipe's
    revisions with the file list unchecked (the dev image before the manifests were locked)."""
    pinned: dict[str, str] = {}
    for key in ("model", "drafter"):
        entry = raw.get(key)
        if isinstance(entry, Mapping) and isinstance(entry.get("repo"), str):
            pinned[entry["repo"]] = str(entry.get("revision"))
    by_repo = {w.repo: w for w in spec} if spec is not None else {}
    out: list[RepoWeights] = []
    for repo in repos:
        if repo not in pinned:
            raise PreflightError(
                f"the argv loads {repo}, which the recipe pins neither as model nor as drafter"
            )
        found = by_repo.get(repo)
        if spec is not None and found is None:
            raise PreflightError(f"the weights spec has no entry for {repo}; rebuild the image")
        if found is not None and found.revision != pinned[repo]:
            raise PreflightError(
                f"the weights spec pins {repo} at {found.revision}, the recipe at {pinned[repo]}; "
                "rebuild the image"
            )
        out.append(found or RepoWeights(repo=repo, revision=pinned[repo], files=None))
    return out


def check_cache_volume(volume: Path, home: Path | None = None) -> None:
    """The JIT cache volume must be writable; HOME, when it lies inside (as the image sets it), is
    created there, since a bind-mounted host directory does not carry the image's copy of it."""
    probe = volume / ".bitexact-write-probe"
    try:
        volume.mkdir(parents=True, exist_ok=True)
        probe.write_text("ok")
        probe.unlink()
        if home is not None and home.is_relative_to(volume):
            home.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise PreflightError(
            f"the JIT cache {volume} is not writable by uid {os.getuid()} ({error.strerror}); mount a "
            f"volume there (`-v bitexact-jit:{volume}`) so DeepGEMM/Triton/FlashInfer kernels "
            "survive restarts"
        ) from error


def run_preflight(
    settings: Settings,
    variant: str,
    *,
    engine_check: Callable[[Recipe], list[PreflightFailure]] = engine_preflight,
) -> list[str]:
    """Every check; raises PreflightError on the first failure, returns warnings otherwise."""
    try:
        recipe = load_recipe(settings.recipe)
        argv, _env = apply_variant(recipe.argv, recipe.env, variant_named(recipe, variant))
    except RecipeError as error:
        raise PreflightError(str(error)) from error
    raw = recipe.data  # the same reading of the file as the launcher's (strict JSON, checked shape)

    libs, cards = find_gpus(settings.environ)
    check_driver_library(libs)
    warnings = check_card(cards, card_of(raw, settings.recipe), allow_other=settings.allow_other_card)

    if settings.hub_cache is None:
        raise PreflightError("no hub cache: neither BITEXACT_HF_HUB_CACHE nor HF_HUB_CACHE is set")
    spec = load_spec(settings.weights_spec) if settings.weights_spec is not None else None
    check_weights(settings.hub_cache, expected_weights(raw, spec, repos_named(argv)))

    if settings.cache_volume is not None:
        check_cache_volume(settings.cache_volume, settings.home)

    if EXACT_FLAG in argv:
        failures = engine_check(recipe)
        if failures:
            lines = "\n".join(f"  {f}".replace("\n", "\n  ") for f in failures)
            raise PreflightError(f"unpatched engine, refusing exact mode ({EXACT_FLAG}):\n{lines}")
    return warnings


def server_command(variant: str, port: str) -> list[str]:
    """The server the entrypoint execs: the recipe's argv via the launcher, reachable from outside."""
    return ["bitexact-server", "--variant", variant, "--host", "0.0.0.0", "--port", port]


def _parser() -> argparse.ArgumentParser:
    parser = strict_parser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument(
        "--variant", default="recipe", action=Once, help="recipe variant to serve (default: recipe)"
    )
    parser.add_argument(
        "--port",
        default=DEFAULT_PORT,
        action=Once,
        type=typed(values.port_text),
        help=f"port inside the container (default {DEFAULT_PORT})",
    )
    parser.add_argument(
        "--preflight-only", action="store_true", help="run the preflight and exit 0 when it passes"
    )
    return parser


@one_line(PROG)
def main(args: Sequence[str] | None = None) -> int:
    options = _parser().parse_args(list(sys.argv[1:] if args is None else args))
    try:
        warnings = run_preflight(Settings.from_env(os.environ), options.variant)
    except PreflightError as error:
        print(f"{PROG}: refusing to start: {error}", file=sys.stderr)
        return 2
    for warning in warnings:
        print(f"{PROG}: warning: {warning}", file=sys.stderr)
    print(f"{PROG}: preflight passed", file=sys.stderr)
    if options.preflight_only:
        return 0
    command = server_command(options.variant, options.port)
    sys.stderr.flush()
    try:
        os.execvp(command[0], command)
    except OSError as error:
        print(f"{PROG}: error: cannot start {command[0]}: {error.strerror or error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
