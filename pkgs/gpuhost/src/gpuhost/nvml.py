"""The identity of the host's NVIDIA cards, read through NVML (nvidia-ml-py's `pynvml`), never by
running nvidia-smi: a host binary cannot run in a Nix rootfs or build sandbox without the host's loader.

pynvml opens `libnvidia-ml.so.1` by its soname. This module first loads the library by the full path
that driver discovery found; glibc then answers pynvml's dlopen with the object already loaded (it
matches the requested name against the DT_SONAME of loaded objects), so the reader works in processes
whose LD_LIBRARY_PATH does not name the driver (this one, in the entrypoint and in bitexact).
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gpuhost.driver import LIBNVML, OVERRIDE_VAR, DriverLibs, DriverNotFound, find_driver

NVIDIA_VENDOR_ID = 0x10DE
NVML_PACKAGE = "nvidia-ml-py"


class NvmlError(Exception):
    """NVML cannot say which cards there are; the message names the cause and the fix."""


@dataclass(frozen=True)
class CardIdentity:
    """One card as NVML reports it. `pci_device_id` is the 16-bit PCI device id (0x2BB4), from NVML's
    32-bit pciDeviceId (device << 16 | vendor); `pci_subsystem_id` is NVML's pciSubSystemId as is."""

    name: str
    pci_device_id: int
    pci_vendor_id: int
    pci_subsystem_id: int
    memory_total: int
    compute_capability: str
    uuid: str
    pci_bus_id: str
    mig_enabled: bool
    cuda_cores: int | None
    driver_version: str
    cuda_driver_version: str

    @property
    def memory_mib(self) -> int:
        return self.memory_total // (1 << 20)

    @property
    def pci_id(self) -> str:
        return f"{self.pci_vendor_id:04x}:{self.pci_device_id:04x}"

    def describe(self) -> str:
        return (
            f"{self.name} (PCI {self.pci_id}, {self.memory_mib} MiB, compute capability "
            f"{self.compute_capability}{', MIG enabled' if self.mig_enabled else ''})"
        )

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["pci_device_id"] = f"0x{self.pci_device_id:04X}"
        out["pci_vendor_id"] = f"0x{self.pci_vendor_id:04X}"
        out["pci_subsystem_id"] = f"0x{self.pci_subsystem_id:08X}"
        return out


def _text(value: str | bytes) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else value


def _pynvml() -> Any:
    try:
        import pynvml
    except ImportError as error:
        raise NvmlError(
            f"{NVML_PACKAGE} is not installed in this Python (it provides pynvml, which reads the card's "
            f"identity from the driver): `pip install {NVML_PACKAGE}`"
        ) from error
    return pynvml


def _optional(call: Any, pynvml: Any) -> Any:
    """`call()`, or None where the card or driver does not support the query."""
    try:
        return call()
    except pynvml.NVMLError as error:
        if getattr(error, "value", None) in (
            pynvml.NVML_ERROR_NOT_SUPPORTED,
            pynvml.NVML_ERROR_FUNCTION_NOT_FOUND,
        ):
            return None
        raise


def read_cards(
    libs: DriverLibs | None = None, environ: Mapping[str, str] | None = None
) -> list[CardIdentity]:
    """Every card NVML sees (in NVML's index order). DriverNotFound when there is no driver at all;
    NvmlError when the driver is there but cannot be asked."""
    libs = libs if libs is not None else find_driver(environ)
    if libs.nvml is None:
        raise NvmlError(
            f"the driver in {libs.found_in} has {libs.libcuda.name} but no {LIBNVML}; with the NVIDIA "
            "container toolkit keep `utility` in NVIDIA_DRIVER_CAPABILITIES (the image sets "
            "compute,utility), elsewhere copy the driver's libnvidia-ml.so* next to libcuda"
        )
    pynvml = _pynvml()
    try:
        ctypes.CDLL(str(libs.nvml))
    except OSError as error:
        raise NvmlError(f"{libs.nvml} does not load: {error}") from error
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as error:
        raise NvmlError(
            f"NVML ({libs.nvml}) cannot reach the driver: {error}; the kernel module and the "
            "user-space driver must be the same version, and /dev/nvidia* must be visible"
        ) from error
    try:
        driver = _text(pynvml.nvmlSystemGetDriverVersion())
        cuda = pynvml.nvmlSystemGetCudaDriverVersion_v2()
        cards = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            pci = pynvml.nvmlDeviceGetPciInfo(handle)
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
            mig = _optional(lambda h=handle: pynvml.nvmlDeviceGetMigMode(h), pynvml)
            cards.append(
                CardIdentity(
                    name=_text(pynvml.nvmlDeviceGetName(handle)),
                    pci_device_id=(pci.pciDeviceId >> 16) & 0xFFFF,
                    pci_vendor_id=pci.pciDeviceId & 0xFFFF,
                    pci_subsystem_id=pci.pciSubSystemId,
                    memory_total=pynvml.nvmlDeviceGetMemoryInfo(handle).total,
                    compute_capability=f"{major}.{minor}",
                    uuid=_text(pynvml.nvmlDeviceGetUUID(handle)),
                    pci_bus_id=_text(pci.busId),
                    mig_enabled=bool(mig and mig[0]),
                    cuda_cores=_optional(lambda h=handle: pynvml.nvmlDeviceGetNumGpuCores(h), pynvml),
                    driver_version=driver,
                    cuda_driver_version=f"{cuda // 1000}.{cuda % 1000 // 10}",
                )
            )
        return cards
    except pynvml.NVMLError as error:
        raise NvmlError(f"NVML ({libs.nvml}) failed while reading the cards: {error}") from error
    finally:
        pynvml.nvmlShutdown()


def local_cards(
    environ: Mapping[str, str] | None = None, root: Path = Path("/")
) -> list[CardIdentity] | None:
    """The cards of this machine, or None when it has no NVIDIA driver at all (a CPU machine).
    NvmlError when a driver is there but its cards cannot be read (nvidia-ml-py missing, say);
    DriverNotFound when BITEXACT_DRIVER_LIB names a directory without the driver."""
    env = os.environ if environ is None else environ
    try:
        libs = find_driver(env, root)
    except DriverNotFound:
        if env.get(OVERRIDE_VAR):
            raise  # the user named a directory: say what is wrong with it
        return None
    return read_cards(libs)
