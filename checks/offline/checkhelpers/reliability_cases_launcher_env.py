"""Catalogue rows of the launcher's values from the environment and the machine: a relative
XDG_CACHE_HOME (ignored, as the XDG specification says), a BITEXACT_HF_HUB_CACHE that names no folder,
and more replicas on one GPU than its memory holds the weights of (the card: the NVML stand-in of
driver_standins.py, compiled in the row's folder). A stdout that cannot be written is
test_launcher_environment.py's (the catalogue's runner reads every program's stdout)."""

from __future__ import annotations

import json
from pathlib import Path

from checkhelpers.driver_standins import MAX_Q, install_driver, nvml_env
from checkhelpers.reliability_setup import RECIPE, Case, Setup, both, write

DATA = json.loads(RECIPE.read_text())


def hub_with_weights(model_mib: int) -> Setup:
    """A hub cache at {tmp}/hub with the recipe's model and drafter at their revisions, sparse files."""

    def setup(tmp: Path) -> None:
        for section, mib in (("model", model_mib), ("drafter", 1000)):
            repo, rev = DATA[section]["repo"], DATA[section]["revision"]
            snap = tmp / "hub" / ("models--" + repo.replace("/", "--")) / "snapshots" / rev
            snap.mkdir(parents=True)
            with (snap / "model.safetensors").open("wb") as handle:
                handle.truncate(mib << 20)

    return setup


CASES: list[Case] = [
    Case(
        "ln-xdg-relative",
        "launcher",
        "a relative XDG_CACHE_HOME (the JIT cache depended on the working folder)",
        ("--recipe", str(RECIPE), "--print"),
        0,
        r"XDG_CACHE_HOME='cache' is not an absolute path, and the XDG specification says to ignore it: "
        r"caches go to .*/\.cache",
        env={"XDG_CACHE_HOME": "cache", "BITEXACT_DEEP_GEMM": "/nix/store/x-deep-gemm"},
    ),
    Case(
        "ln-hub-cache-missing",
        "launcher",
        "a BITEXACT_HF_HUB_CACHE that names no folder (it was passed on)",
        ("--recipe", str(RECIPE), "--print"),
        2,
        r"\$BITEXACT_HF_HUB_CACHE='.*/weights' names no folder \(it is nothing: no such folder\): it names "
        r"the hub cache the server loads the pinned weights from; build one",
        env={"BITEXACT_HF_HUB_CACHE": "{tmp}/weights"},
    ),
    Case(
        "ln-hub-cache-file",
        "launcher",
        "a BITEXACT_HF_HUB_CACHE that is a file",
        ("--recipe", str(RECIPE), "--print"),
        2,
        r"\$BITEXACT_HF_HUB_CACHE='.*/weights' names no folder \(it is a file\)",
        write("weights", "x"),
        env={"BITEXACT_HF_HUB_CACHE": "{tmp}/weights"},
    ),
    Case(
        "ln-replicas-do-not-fit",
        "launcher",
        "more replicas on one GPU than its memory holds the weights of (they were planned)",
        ("--recipe", str(RECIPE), "--print", "--replicas", "3", "--port", "30000"),
        2,
        r"3 replicas share GPU 0: each would get 0.2933 of its 97887 MiB, 28714 MiB, less than the 52200 MiB "
        r"of weights each loads; at most 1 fit there: give fewer --replicas, or more GPUs \(--gpus\)",
        both(hub_with_weights(51200), lambda tmp: install_driver(tmp / "driver") and None),
        env={"BITEXACT_HF_HUB_CACHE": "{tmp}/hub", "BITEXACT_DRIVER_LIB": "{tmp}/driver", **nvml_env(MAX_Q)},
    ),
]
