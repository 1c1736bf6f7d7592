"""Whether the HF hub cache holds the weights the recipe names, as `--model-path <repo>` resolves them.

The verbatim argv names repos, not revisions: with HF_HUB_OFFLINE=1 huggingface_hub reads
`models--<org>--<name>/refs/main` (verbatim, no newline stripped) and opens
`snapshots/<that revision>/<file>`. So the check is: refs/main holds the recipe's revision, and every
file of the manifest (written by nix/lib/hf-cache.nix `completenessSpec`) is there with its size.
Sizes, not hashes: the store already verified the content, and hashing ~55 GB at every start is minutes.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from exactformats import strictjson

from image_entrypoint.checks import PreflightError


@dataclass(frozen=True)
class RepoWeights:
    repo: str
    revision: str
    # (path, size) of every file; None when no manifest was baked in (the dev image before locking).
    files: tuple[tuple[str, int], ...] | None


def repo_folder(repo: str) -> str:
    org, _, name = repo.partition("/")
    return f"models--{org}--{name}"


def load_spec(path: Path) -> list[RepoWeights]:
    """The completeness spec the image bakes in (a JSON list of {repo, revision, files: [{path, size}]})."""
    try:
        data = strictjson.loads(path.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, strictjson.JsonProblem) as error:
        raise PreflightError(f"cannot read the weights spec {path}: {error}") from error
    try:
        return [
            RepoWeights(
                repo=str(entry["repo"]),
                revision=str(entry["revision"]),
                files=tuple((str(f["path"]), int(f["size"])) for f in entry["files"]),
            )
            for entry in data
        ]
    except (TypeError, KeyError, ValueError) as error:
        raise PreflightError(f"the weights spec {path} is malformed ({error!r})") from error


def check_repo(cache: Path, weights: RepoWeights) -> None:
    """Raise unless `cache` resolves weights.repo to weights.revision with every file complete."""
    folder = cache / repo_folder(weights.repo)
    ref = folder / "refs" / "main"
    fix = (
        f"the cache at {cache} must hold {weights.repo} at {weights.revision} (the image built with "
        "`nix build .#image` bakes it in; with `.#image-dev`, mount a hub cache and set HF_HUB_CACHE)"
    )
    try:
        resolved = ref.read_text()
    except OSError:
        raise PreflightError(f"missing weights: {ref} does not exist; {fix}") from None
    if resolved != weights.revision:
        raise PreflightError(
            f"wrong weights revision: {ref} holds {resolved.strip()!r}, the recipe needs {weights.revision} "
            "(`--model-path` resolves through refs/main); point refs/main at the recipe's revision"
        )
    snapshot = folder / "snapshots" / weights.revision
    if not snapshot.is_dir():
        raise PreflightError(f"missing weights: {snapshot} does not exist; {fix}")
    if weights.files is None:
        return
    missing: list[str] = []
    short: list[str] = []
    for rel, size in weights.files:
        target = snapshot / rel
        try:
            actual = os.stat(target).st_size
        except OSError:
            missing.append(rel)
            continue
        if actual != size:
            short.append(f"{rel} ({actual} of {size} bytes)")
    if missing or short:
        parts = []
        if missing:
            parts.append(
                f"{len(missing)} missing ({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''})"
            )
        if short:
            parts.append(
                f"{len(short)} of the wrong size ({', '.join(short[:3])}{', ...' if len(short) > 3 else ''})"
            )
        raise PreflightError(
            f"incomplete weights for {weights.repo}@{weights.revision} in {snapshot}: "
            f"{'; '.join(parts)}; {fix}"
        )


def check_weights(cache: Path, repos: Sequence[RepoWeights]) -> None:
    for weights in repos:
        check_repo(cache, weights)
