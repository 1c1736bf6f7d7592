"""The host's NVIDIA driver and cards, found and read without running a host binary.

- `gpuhost.driver`: where libcuda.so.1 and the driver's other libraries are (NixOS, the NVIDIA container
  toolkit, FHS hosts, BITEXACT_DRIVER_LIB), and the environment a child process needs to use them.
- `gpuhost.nvml`: each card's identity through NVML (name, PCI ids, memory, compute capability,
  driver and CUDA versions).
- `gpuhost.cards`: identity -> golden slug, from the one table (cards.json, docs/cards.md).

Standard library only, except nvidia-ml-py (`pynvml`), which only the NVML reader imports. Used by the
launcher (exactlaunch), the image entrypoint, the GPU checks and bitexact.
"""

from gpuhost.cards import CardIdentityError, bits_verdict, local_card, slug_for
from gpuhost.driver import DriverLibs, DriverNotFound, driver_environment, find_driver
from gpuhost.nvml import CardIdentity, NvmlError, read_cards

__all__ = [
    "CardIdentity",
    "CardIdentityError",
    "DriverLibs",
    "DriverNotFound",
    "NvmlError",
    "bits_verdict",
    "driver_environment",
    "find_driver",
    "local_card",
    "read_cards",
    "slug_for",
]
