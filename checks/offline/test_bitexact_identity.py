"""bitexact's card identity (bitexact.identity) through gpuhost's NVML reader and card table: against the
NVML stand-in it keys goldens by the table's slug and records every card's identity; where the card
cannot be read (no gpuhost, no nvidia-ml-py) it refuses naming --card instead of keying as `cpu`.
Each case runs in a fresh process, since pynvml keeps the library it loaded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from checkhelpers.bare_python import run_bare, stage_packages
from checkhelpers.driver_standins import H100_PCIE, MAX_Q, install_driver, nvml_env

PROBE = (
    "import json\n"
    "from bitexact.errors import UsageError\n"
    "from bitexact.identity import detect_card, gpu_info\n"
    "try:\n"
    "    card = detect_card()\n"
    "except UsageError as error:\n"
    "    card = 'UsageError: ' + str(error)\n"
    "print(json.dumps({'card': card, 'info': gpu_info()}))\n"
)


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return install_driver(tmp_path_factory.mktemp("driver") / "lib")


def probe(env: dict[str, str], bare: Path | None = None) -> dict[str, object]:
    """PROBE in a fresh process: this interpreter, or with `bare` a `python -S` that imports only the
    standard library and the packages staged there (checkhelpers.bare_python)."""
    base = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "BITEXACT_DRIVER_LIB")}
    if bare is not None:
        done = run_bare(bare, ["-c", PROBE], {**base, **env})
    else:
        done = subprocess.run(
            [sys.executable, "-c", PROBE], env={**base, **env}, capture_output=True, text=True, timeout=60
        )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_keys_by_the_tables_slug(driver: Path) -> None:
    result = probe({"BITEXACT_DRIVER_LIB": str(driver), **nvml_env(MAX_Q)})
    assert result["card"] == "rtx-pro-6000-blackwell"
    info = result["info"]
    assert info["driver"] == "580.159.04" and info["cuda_driver"] == "13.0"
    (card,) = info["cards"]
    assert (card["name"], card["pci_device_id"], card["slug"]) == (MAX_Q.name, "0x2BB4", result["card"])
    assert probe({"BITEXACT_DRIVER_LIB": str(driver), **nvml_env(H100_PCIE)})["card"] == "h100-pcie"


def test_a_driver_without_nvidia_ml_py_is_not_cpu(driver: Path, tmp_path: Path) -> None:
    """`python -S` drops site-packages (pynvml); bitexact, gpuhost and exactformats are staged beside it."""
    bare = stage_packages(tmp_path / "bare", ["bitexact", "gpuhost", "exactformats"])
    result = probe({"BITEXACT_DRIVER_LIB": str(driver), **nvml_env(MAX_Q)}, bare)
    assert str(result["card"]).startswith("UsageError: cannot read this machine's card")
    assert "pip install nvidia-ml-py" in str(result["card"]) and "--card SLUG" in str(result["card"])
    assert "nvidia-ml-py" in str(result["info"]["error"])


def test_without_gpuhost_the_card_is_named_by_hand(driver: Path, tmp_path: Path) -> None:
    """`python -S` with bitexact and exactformats staged, gpuhost not."""
    bare = stage_packages(tmp_path / "bare", ["bitexact", "exactformats"])
    result = probe({"BITEXACT_DRIVER_LIB": str(driver)}, bare)
    assert result["card"] == "UsageError: " + (
        "the card cannot be read: gpuhost (the NVML card reader, pkgs/gpuhost; "
        "`pip install ./pkgs/formats ./pkgs/gpuhost`) is not importable here; pass --card SLUG"
    )


@pytest.mark.skipif(Path("/proc/driver/nvidia").exists(), reason="this machine has an NVIDIA driver")
def test_a_machine_without_a_driver_is_cpu() -> None:
    result = probe({})
    assert result == {"card": "cpu", "info": {}}
