"""The NVML card reader (gpuhost.nvml) with the real nvidia-ml-py (the lock's 13.610.43) against the
NVML stand-in of driver_standins.py, each case in a fresh process whose LD_LIBRARY_PATH does not name
the driver: the reader loads libnvidia-ml.so.1 by the path discovery found, and pynvml's own
dlopen("libnvidia-ml.so.1") is answered with that object (a control shows pynvml alone cannot)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from checkhelpers.bare_python import run_bare, stage_packages
from checkhelpers.driver_standins import DRIVER_VERSION, H200, MAX_Q, Card, install_driver, nvml_env
from gpuhost.driver import OVERRIDE_VAR

READ = (
    "import json, sys\n"
    "from gpuhost.nvml import read_cards, NvmlError\n"
    "from gpuhost.driver import DriverNotFound\n"
    "try:\n"
    "    print(json.dumps([c.to_json() for c in read_cards()]))\n"
    "except (NvmlError, DriverNotFound) as error:\n"
    "    print(json.dumps({'error': type(error).__name__, 'message': str(error)}))\n"
)


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return install_driver(tmp_path_factory.mktemp("driver") / "lib")


def run(code: str, env: dict[str, str], bare: Path | None = None) -> object:
    """`code` in a fresh process: this interpreter, or with `bare` a `python -S` that imports only the
    standard library and the packages staged there (checkhelpers.bare_python)."""
    base = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", OVERRIDE_VAR)}
    if bare is not None:
        done = run_bare(bare, ["-c", code], {**base, **env})
    else:
        done = subprocess.run(
            [sys.executable, "-c", code], env={**base, **env}, capture_output=True, text=True, timeout=60
        )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_reads_every_card(driver: Path) -> None:
    cards = run(READ, {OVERRIDE_VAR: str(driver), **nvml_env(MAX_Q, H200)})
    assert isinstance(cards, list) and len(cards) == 2
    blackwell, hopper = cards
    assert blackwell == {
        "name": MAX_Q.name,
        "pci_device_id": "0x2BB4",
        "pci_vendor_id": "0x10DE",
        "pci_subsystem_id": "0x204C10DE",
        "memory_total": 97887 << 20,
        "compute_capability": "12.0",
        "uuid": "GPU-00000000-0000-0000-0000-000000000000",
        "pci_bus_id": "00000000:17:00.0",
        "mig_enabled": False,
        "cuda_cores": 24064,
        "driver_version": DRIVER_VERSION,
        "cuda_driver_version": "13.0",
    }
    assert hopper["name"] == "NVIDIA H200" and hopper["pci_device_id"] == "0x2335"
    assert hopper["memory_total"] == 143771 << 20 and hopper["cuda_cores"] is None


def test_pynvml_alone_does_not_find_the_driver(driver: Path) -> None:
    """The control: without the load by path, pynvml's dlopen by soname fails in the same process
    setup, so the reader's success above is the preload at work."""
    code = (
        "import json, pynvml\n"
        "try:\n"
        "    pynvml.nvmlInit(); print(json.dumps('loaded'))\n"
        "except pynvml.NVMLError as e:\n"
        "    print(json.dumps(e.value == pynvml.NVML_ERROR_LIBRARY_NOT_FOUND))\n"
    )
    found = run(code, nvml_env(MAX_Q))
    if found == "loaded":
        pytest.fail("pynvml found a libnvidia-ml.so.1 of its own: this machine has an NVIDIA driver")
    assert found is True


def test_mig_and_driver_versions(driver: Path) -> None:
    mig = Card(H200.name, H200.pci_device_id, H200.pci_subsystem_id, H200.memory_mib, "9.0", mig=True)
    (card,) = run(READ, {OVERRIDE_VAR: str(driver), **nvml_env(mig, driver="590.48.01", cuda=13010)})
    assert card["mig_enabled"] is True
    assert (card["driver_version"], card["cuda_driver_version"]) == ("590.48.01", "13.1")


def test_a_driver_without_nvml_names_the_utility_capability(tmp_path: Path) -> None:
    no_nvml = install_driver(tmp_path / "lib", nvml=False)
    result = run(READ, {OVERRIDE_VAR: str(no_nvml), **nvml_env(MAX_Q)})
    assert result["error"] == "NvmlError"
    assert "no libnvidia-ml.so.1" in result["message"] and "NVIDIA_DRIVER_CAPABILITIES" in result["message"]


def test_a_driver_that_cannot_be_reached(driver: Path) -> None:
    result = run(READ, {OVERRIDE_VAR: str(driver), "STANDIN_NVML_INIT": "9", **nvml_env(MAX_Q)})
    assert result["error"] == "NvmlError"
    assert "cannot reach the driver: Driver Not Loaded" in result["message"]


def test_without_nvidia_ml_py_the_message_names_the_package(driver: Path, tmp_path: Path) -> None:
    """`python -S`: no site-packages, so no pynvml; gpuhost and exactformats staged beside it."""
    bare = stage_packages(tmp_path / "bare", ["gpuhost", "exactformats"])
    env = {OVERRIDE_VAR: str(driver), **nvml_env(MAX_Q)}
    result = run(READ, env, bare)
    assert result["error"] == "NvmlError"
    assert "pip install nvidia-ml-py" in result["message"]


def test_no_driver_is_not_an_nvml_error(tmp_path: Path) -> None:
    result = run(READ, {OVERRIDE_VAR: str(tmp_path)})
    assert result["error"] == "DriverNotFound" and OVERRIDE_VAR in result["message"]
