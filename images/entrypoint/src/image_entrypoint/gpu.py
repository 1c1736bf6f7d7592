"""Which GPUs the container sees, and whether they are the recipe's card: read through NVML from the
driver libraries the NVIDIA container toolkit mounts, never by running `nvidia-smi`. The toolkit mounts
that binary too, but it is a host glibc program and the image has no /lib64/ld-linux-x86-64.so.2 (a
Nix rootfs), so exec'ing it fails; the entrypoint runs no host binary at all.

Driver discovery, the NVML reader and the card table are gpuhost's (pkgs/gpuhost), shared
with the launcher, the GPU checks and bitexact: the entrypoint accepts exactly the cards the table
gives the recipe's slug (docs/cards.md).
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpuhost.cards import bits_verdict, rows_with_slug, slug_for
from gpuhost.driver import DriverLibs, DriverNotFound, find_driver
from gpuhost.nvml import CardIdentity, NvmlError, read_cards

from image_entrypoint.checks import PreflightError

GPU_HINT = (
    "run the container with the NVIDIA container toolkit (`docker run --gpus all ...`, or "
    "NVIDIA_VISIBLE_DEVICES=<ids> with the nvidia runtime) and keep NVIDIA_DRIVER_CAPABILITIES="
    "compute,utility (set in the image)"
)


@dataclass(frozen=True)
class Card:
    """The recipe's `card` entry."""

    slug: str
    name: str


def find_gpus(environ: Mapping[str, str]) -> tuple[DriverLibs, list[CardIdentity]]:
    """The driver's libraries and every card NVML lists."""
    try:
        libs = find_driver(environ)
    except DriverNotFound as error:
        raise PreflightError(f"no GPU visible: {error}") from error
    try:
        cards = read_cards(libs)
    except NvmlError as error:
        raise PreflightError(f"no GPU visible: {error}; {GPU_HINT}") from error
    if not cards:
        raise PreflightError(f"no GPU visible: NVML ({libs.nvml}) lists no card; {GPU_HINT}")
    return libs, cards


def check_driver_library(libs: DriverLibs) -> None:
    """The CUDA driver library must load (by the path discovery found: this process's library path
    does not name it; the launcher gives the server one that does)."""
    try:
        ctypes.CDLL(str(libs.libcuda))
    except OSError as error:
        raise PreflightError(
            f"the CUDA driver library {libs.libcuda} does not load ({error}); {GPU_HINT}"
        ) from error


def check_card(cards: Sequence[CardIdentity], card: Card, *, allow_other: bool) -> list[str]:
    """Every visible card must have the recipe's slug in the card table: golden records and the
    recipe's bits are per card. A refusal says, for each other card, whether its bits would match.
    Returns warnings when other cards are allowed."""
    wrong = [c for c in cards if slug_for(c) != card.slug]
    if not wrong:
        return []
    accepted = " or ".join(r.name for r in rows_with_slug(card.slug)) or card.name
    seen = "; ".join(f"{c.describe()}, slug {slug_for(c)}: {bits_verdict(c, card.slug)}" for c in wrong)
    message = f"wrong card: the recipe is for {accepted} (slug {card.slug}) but the container sees {seen}"
    if allow_other:
        return [
            f"{message}; going on because BITEXACT_ALLOW_OTHER_CARD=1 (outputs are exact on this card, "
            "not known to equal the recipe's card's)"
        ]
    raise PreflightError(
        f"{message}. Pick the card with NVIDIA_VISIBLE_DEVICES, or set BITEXACT_ALLOW_OTHER_CARD=1 to "
        "serve anyway (exact within this card, not equal to the recipe's card)"
    )
