"""Whether the replicas the fleet plans on one GPU fit it: k replicas sharing a GPU each get the recipe's
`--mem-fraction-static` / k of the card (fleet.py), and SGLang loads the whole model (and the drafter,
when the argv speculates) into each share before any cache, so a share smaller than the weights cannot
start; it would fail minutes into loading, after the replicas before it. The weights are measured where
the server will read them (the hub cache the launch's environment names, the snapshot of the revision
the recipe pins), the card through NVML (gpuhost). Where either cannot be known (no card here, the
weights not in the cache yet), the plan goes on and says what it could not check."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from exactlaunch.recipe import WEIGHTS_FLAGS


class DoesNotFit(ValueError):
    """More replicas share a GPU than its memory holds the weights of."""


def hub_cache(env: Mapping[str, str]) -> Path:
    """The hub cache huggingface_hub would read under `env`: HF_HUB_CACHE, else $HF_HOME/hub."""
    if env.get("HF_HUB_CACHE"):
        return Path(env["HF_HUB_CACHE"])
    home = env.get("HF_HOME") or os.path.join(
        env.get("HOME") or os.path.expanduser("~"), ".cache", "huggingface"
    )
    return Path(home) / "hub"


def weights_bytes(
    recipe: Mapping[str, Any], argv: Sequence[str], env: Mapping[str, str]
) -> tuple[int | None, str]:
    """The bytes of the weights `argv` loads (the model, and the drafter when it speculates), from the
    snapshots in the hub cache; (None, why) when they are not there to measure."""
    total = 0
    for flag, section in WEIGHTS_FLAGS.items():
        if flag not in argv:
            continue
        entry = recipe.get(section)
        if not isinstance(entry, Mapping) or not isinstance(entry.get("repo"), str):
            return None, f"the recipe's `{section}` names no Hub repo"
        repo, revision = entry["repo"], entry.get("revision")
        snapshot = hub_cache(env) / ("models--" + repo.replace("/", "--")) / "snapshots" / str(revision)
        if not isinstance(revision, str) or not snapshot.is_dir():
            return None, f"{repo}@{str(revision)[:12]} is not in the hub cache {hub_cache(env)}"
        for path in snapshot.rglob("*"):
            if path.is_file():
                total += path.stat().st_size
    return total, ""


def card_memory(environ: Mapping[str, str]) -> tuple[dict[str, int] | None, str]:
    """Each visible GPU's memory in bytes, by index; (None, why) when no card can be read here."""
    try:
        from gpuhost.nvml import local_cards

        cards = local_cards(environ)
    except Exception as error:  # no driver, no NVML, nvidia-ml-py missing: nothing to measure with
        return None, f"the cards cannot be read here ({type(error).__name__}: {error})"
    if not cards:
        return None, "this machine has no NVIDIA card"
    return {str(index): card.memory_total for index, card in enumerate(cards)}, ""


def check_fit(
    sharing: Mapping[str, int], fraction: float | None, weights: int | None, memory: Mapping[str, int] | None
) -> list[str]:
    """Notes for stderr, or DoesNotFit naming the GPU, what each replica would get and how many fit.
    `sharing`: replicas per GPU index; `fraction`: the launch's --mem-fraction-static."""
    notes = []
    for gpu, count in sorted(sharing.items()):
        if count < 2:
            continue
        share = (fraction or 0.0) / count
        if weights is None or memory is None or gpu not in memory:
            notes.append(
                f"{count} replicas share GPU {gpu}, each with {share:.4g} of its memory; whether the weights "
                "fit in that could not be checked here"
            )
            continue
        need, have = weights / (1 << 20), share * memory[gpu] / (1 << 20)
        if have < need:
            fits = int((fraction or 0.0) * memory[gpu] // weights) if weights else 0
            raise DoesNotFit(
                f"{count} replicas share GPU {gpu}: each would get {share:.4g} of its {memory[gpu] >> 20} "
                f"MiB, {have:.0f} MiB, less than the {need:.0f} MiB of weights each loads; at most {fits} "
                "fit there: give fewer --replicas, or more GPUs (--gpus)"
            )
    return notes
