"""The flake's battery plan (checks/plans/e2e-tiny-hybrid.json) run by the real bitexact, as the GPU
check's runner runs its commands, on an H200 as the NVML stand-in describes it: what the checks' battery
test and the lab's summary test share."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from gpuchecks.plan import fill  # the runner's own placeholder filling

from checkhelpers.driver_standins import H200, install_driver, nvml_env
from checkhelpers.repo import REPO

PLAN = json.loads((REPO / "checks" / "plans" / "e2e-tiny-hybrid.json").read_text())
RECIPE = REPO / "nix" / "recipes" / "e2e-tiny-hybrid.json"
SHORT_LONG = "64,300"  # the long reference's lengths, shortened as the runner's --long does
BATTERIES = PLAN["batteries"]


def card_env(folder: Path) -> dict[str, str]:
    """The environment under which bitexact reads an H200 through NVML (the stand-in driver in folder)."""
    driver = install_driver(folder / "lib")
    return {"BITEXACT_DRIVER_LIB": str(driver), **nvml_env(H200)}


def run_bitexact(command: list[str], cwd: Path, card: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The installed bitexact, as the runner runs a plan's command, with only the card's environment of
    ours."""
    assert command[0] == "bitexact"
    env = {k: v for k, v in os.environ.items() if not k.startswith("BITEXACT_") and k != "LD_LIBRARY_PATH"}
    return subprocess.run(
        [sys.executable, "-m", "bitexact", *command[1:]],
        cwd=cwd,
        env=env | card,
        capture_output=True,
        text=True,
    )


def run_references(url: str, root: Path, card: dict[str, str]) -> dict[str, Path]:
    """The plan's own reference commands against the server at url (the no-spec side): each reference's
    file by its kind."""
    made = {}
    for kind, reference in PLAN["references"].items():
        out = root / reference["name"]
        out.mkdir()
        for command in reference["commands"]:
            command = list(command)
            if "--long" in command:
                command[command.index("--long") + 1] = SHORT_LONG
            values = {"URL": f"sglang+{url}", "RECIPE": str(RECIPE), "OUT": str(out)}
            done = run_bitexact(fill(command, {**values, "MODEL_SNAPSHOT": "bytes"}), root, card)
            assert done.returncode == 0, done.stderr[-3000:]
        made[kind] = out / "reference.json"
    return made
