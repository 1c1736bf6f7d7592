"""A directory laid out as the NVIDIA driver lays out its user-space libraries, for machines without a GPU.

The libraries are real ELF shared objects compiled here with the host's C compiler from
checkhelpers/standins/*.c (sonames libcuda.so.1 and libnvidia-ml.so.1, each behind its version link, as
the driver installs them); the NVML stand-in answers for the cards described in STANDIN_NVML_*
variables (see its source). Cards are described with `device_line` from the values NVML gives.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from gpuhost.nvml import CardIdentity

SOURCES = Path(__file__).resolve().parent / "standins"
DRIVER_VERSION = "580.159.04"  # the lent H200's (docs/evidence/bitexact-h200-2026-11-30/nvidia-smi.txt)
# (source file, soname); each is installed as <soname stem>.so.<driver version> plus the soname link.
LIBRARIES = (("libcuda.c", "libcuda.so.1"), ("libnvidia-ml.c", "libnvidia-ml.so.1"))
# A companion the driver ships next to libcuda (libcuda dlopens it for PTX JIT); built from libcuda.c.
PTXJIT = "libnvidia-ptxjitcompiler.so.1"


@dataclass(frozen=True)
class Card:
    """A card as the NVML stand-in reports it (NVML's own encodings)."""

    name: str
    pci_device_id: int  # NVML's pciDeviceId: device << 16 | vendor
    pci_subsystem_id: int
    memory_mib: int
    compute_capability: str
    cuda_cores: int | None = None
    mig: bool | None = None

    def line(self, index: int = 0) -> str:
        uuid = f"GPU-00000000-0000-0000-0000-{index:012d}"
        bus = f"00000000:{0x17 + index:02X}:00.0"
        fields = [
            self.name,
            f"{self.pci_device_id:08X}",
            f"{self.pci_subsystem_id:08X}",
            str(self.memory_mib << 20),
            self.compute_capability,
            uuid,
            bus,
            "-" if self.mig is None else str(int(self.mig)),
            "-" if self.cuda_cores is None else str(self.cuda_cores),
        ]
        return "|".join(fields)


# The cards the tests use, with their PCI ids (pci.ids; NVIDIA's open-gpu-kernel-modules README table
# for the subsystem ids) and the memory totals NVML reports for them (the H200's from the lent card,
# docs/evidence/bitexact-h200-2026-11-30/remaining/nvidia-smi.txt; the others from public logs).
MAX_Q = Card(
    "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", 0x2BB410DE, 0x204C10DE, 97887, "12.0", 24064
)
WORKSTATION = Card(
    "NVIDIA RTX PRO 6000 Blackwell Workstation Edition", 0x2BB110DE, 0x204B10DE, 97887, "12.0", 24064
)
SERVER = Card("NVIDIA RTX PRO 6000 Blackwell Server Edition", 0x2BB510DE, 0x204E10DE, 97887, "12.0", 24064)
H200 = Card("NVIDIA H200", 0x233510DE, 0x18BE10DE, 143771, "9.0", mig=False)
H100_SXM = Card("NVIDIA H100 80GB HBM3", 0x233010DE, 0x16C010DE, 81559, "9.0", mig=False)
H100_PCIE = Card("NVIDIA H100 PCIe", 0x233110DE, 0x162610DE, 81559, "9.0", mig=False)
H100_NVL = Card("NVIDIA H100 NVL", 0x232110DE, 0x183910DE, 95830, "9.0", mig=False)
RTX_5090 = Card("NVIDIA GeForce RTX 5090", 0x2B8510DE, 0x00000000, 32607, "12.0", 21760)


def nvml_env(*cards: Card, driver: str = DRIVER_VERSION, cuda: int = 13000) -> dict[str, str]:
    """The variables that make the NVML stand-in report `cards`."""
    return {
        "STANDIN_NVML_DEVICES": ";".join(card.line(i) for i, card in enumerate(cards)),
        "STANDIN_NVML_DRIVER": driver,
        "STANDIN_NVML_CUDA": str(cuda),
    }


def compiler() -> str | None:
    return shutil.which("cc") or shutil.which("gcc")


def compile_library(source: str, soname: str, out: Path) -> None:
    cc = compiler()
    if cc is None:
        raise RuntimeError("no C compiler (cc or gcc) on PATH: the driver stand-ins are compiled here")
    cmd = [cc, "-shared", "-fPIC", "-O1", f"-Wl,-soname,{soname}", "-o", str(out), str(SOURCES / source)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"compiling {source} failed: {done.stderr}")


def install_driver(directory: Path, *, nvml: bool = True, built: Path | None = None) -> Path:
    """Lay out the driver's libraries in `directory` (created): libcuda.so.<version> with its
    libcuda.so.1 link, the PTX JIT companion, and libnvidia-ml likewise unless `nvml` is false.
    `built` is a directory of already compiled objects to copy (compiled there when absent)."""
    directory.mkdir(parents=True, exist_ok=True)
    for source, soname in LIBRARIES:
        if soname.startswith("libnvidia-ml") and not nvml:
            continue
        versioned = soname.rsplit(".so", 1)[0] + f".so.{DRIVER_VERSION}"
        if built is not None and (built / versioned).exists():
            shutil.copy2(built / versioned, directory / versioned)
        else:
            compile_library(source, soname, directory / versioned)
        (directory / soname).symlink_to(versioned)
    shutil.copy2(directory / f"libcuda.so.{DRIVER_VERSION}", directory / PTXJIT)
    return directory


def identity(card: Card) -> CardIdentity:
    """The identity gpuhost.nvml builds from NVML's answers for `card` (the stand-in's encodings)."""
    return CardIdentity(
        name=card.name,
        pci_device_id=card.pci_device_id >> 16,
        pci_vendor_id=card.pci_device_id & 0xFFFF,
        pci_subsystem_id=card.pci_subsystem_id,
        memory_total=card.memory_mib << 20,
        compute_capability=card.compute_capability,
        uuid="GPU-0",
        pci_bus_id="00000000:17:00.0",
        mig_enabled=bool(card.mig),
        cuda_cores=card.cuda_cores,
        driver_version="580.159.04",
        cuda_driver_version="13.0",
    )
