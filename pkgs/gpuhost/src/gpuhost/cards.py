"""Card identity -> golden slug: the one table (cards.json beside this file, explained in docs/cards.md).

A card matches a row by its PCI device id, and NVML's memory total must lie within 5% of the row's
nominal size (a board with the same device id and another memory size is another product). A card no
row matches gets a slug derived from its name, device id (and memory or MIG mode where those differ),
never a listed card's slug: two cards share golden records only where the table says their bits are
the same (rows that share a slug must both give `same_bits_evidence`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from gpuhost.driver import DriverNotFound
from gpuhost.nvml import CardIdentity, NvmlError, local_cards

TABLE = Path(__file__).with_name("cards.json")
MEMORY_TOLERANCE = 0.05


class CardTableError(ValueError):
    """cards.json is malformed; the message names the row and the key."""


class CardIdentityError(Exception):
    """This machine's card cannot be named; the message says why and what to pass instead."""


@dataclass(frozen=True)
class CardRow:
    slug: str
    pci_device_id: int
    name: str
    memory_gib: int
    compute_capability: str
    sm_count: int | None
    l2_mib: int | None = None
    notes: str = ""
    same_bits_evidence: str | None = None


def parse_table(data: Any, where: str = "cards.json") -> tuple[CardRow, ...]:
    if not isinstance(data, Mapping) or not isinstance(data.get("cards"), list):
        raise CardTableError(f"{where}: expected an object with a `cards` list")
    rows: list[CardRow] = []
    for index, raw in enumerate(data["cards"]):
        at = f"{where}: cards[{index}]"
        try:
            row = CardRow(
                slug=str(raw["slug"]),
                pci_device_id=int(str(raw["pci_device_id"]), 16),
                name=str(raw["name"]),
                memory_gib=int(raw["memory_gib"]),
                compute_capability=str(raw["compute_capability"]),
                sm_count=None if raw.get("sm_count") is None else int(raw["sm_count"]),
                l2_mib=None if raw.get("l2_mib") is None else int(raw["l2_mib"]),
                notes=str(raw.get("notes", "")),
                same_bits_evidence=raw.get("same_bits_evidence"),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise CardTableError(f"{at}: {error!r}") from error
        if not re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", row.slug):
            raise CardTableError(f"{at}: slug {row.slug!r} is not lower-case words joined by -")
        rows.append(row)
    keys = [(r.pci_device_id, r.memory_gib) for r in rows]
    for row in rows:
        if keys.count((row.pci_device_id, row.memory_gib)) > 1:
            raise CardTableError(
                f"{where}: device id 0x{row.pci_device_id:04X} with {row.memory_gib} GiB is listed twice"
            )
        sharing = [r for r in rows if r.slug == row.slug]
        if len(sharing) > 1 and not all(r.same_bits_evidence for r in sharing):
            names = ", ".join(r.name for r in sharing)
            raise CardTableError(
                f"{where}: slug {row.slug} is shared by {names}; rows share a slug only with "
                "same_bits_evidence on each (goldens compared equal on both cards)"
            )
    return tuple(rows)


@cache
def load_table(path: Path = TABLE) -> tuple[CardRow, ...]:
    return parse_table(json.loads(path.read_text()), str(path))


def row_for(card: CardIdentity, table: Sequence[CardRow] | None = None) -> CardRow | None:
    """The table row of `card`: same device id and NVIDIA's vendor id, memory within tolerance."""
    rows = load_table() if table is None else table
    for row in rows:
        if card.pci_vendor_id == 0x10DE and card.pci_device_id == row.pci_device_id:
            gib = card.memory_total / (1 << 30)
            if abs(gib - row.memory_gib) <= MEMORY_TOLERANCE * row.memory_gib:
                return row
    return None


def derived_slug(card: CardIdentity) -> str:
    """A slug for a card the table does not list: its name, device id and memory size."""
    name = re.sub(r"[^a-z0-9]+", "-", card.name.lower().removeprefix("nvidia ")).strip("-") or "gpu"
    return f"{name}-{card.pci_device_id:04x}-{round(card.memory_total / (1 << 30))}gib"


def slug_for(card: CardIdentity, table: Sequence[CardRow] | None = None) -> str:
    """The golden slug of `card`: its row's, or a derived one; `-mig` when MIG splits the card."""
    row = row_for(card, table)
    slug = row.slug if row is not None else derived_slug(card)
    return f"{slug}-mig" if card.mig_enabled else slug


def rows_with_slug(slug: str, table: Sequence[CardRow] | None = None) -> list[CardRow]:
    return [r for r in (load_table() if table is None else table) if r.slug == slug]


def bits_verdict(card: CardIdentity, slug: str, table: Sequence[CardRow] | None = None) -> str:
    """Whether `card`'s bits would match golden records made on `slug`'s cards, in one sentence."""
    targets = rows_with_slug(slug, table)
    if not targets:
        return f"no card in the table has slug {slug}, so nothing is known about its bits"
    target = targets[0]
    mine = row_for(card, table)
    if card.mig_enabled:
        return "its bits will not match: MIG gives each instance a fraction of the SMs"
    if card.compute_capability != target.compute_capability:
        return (
            f"its bits will not match: another architecture (compute capability "
            f"{card.compute_capability} against {target.compute_capability}), so other kernels run"
        )
    sms = mine.sm_count if mine is not None else None
    if sms is not None and target.sm_count is not None and sms != target.sm_count:
        return (
            f"its bits will not match: {sms} SMs against {target.sm_count}, and kernels that split "
            "work by SM count add in another order"
        )
    if mine is None:
        return (
            "it is not in the card table (docs/cards.md): same architecture, but whether its bits "
            "match is unknown"
        )
    return (
        "same architecture and SM count, but its bits have not been compared with the recipe's card "
        "(other power limit and clocks; kernel choices made by timing may differ): they may match, "
        "unproven (docs/cards.md says how to establish it)"
    )


def local_card(environ: Mapping[str, str] | None = None, root: Path = Path("/")) -> CardIdentity | None:
    """This machine's card, or None when it has no NVIDIA driver (a CPU machine). Several cards are
    fine when they share a slug. CardIdentityError, naming `--card`, when the cards cannot be read or
    differ."""
    try:
        cards = local_cards(environ, root)
    except (NvmlError, DriverNotFound) as error:
        raise CardIdentityError(
            f"cannot read this machine's card: {error}; or name it with --card SLUG"
        ) from None
    if cards is None:
        return None
    if not cards:
        raise CardIdentityError("the NVIDIA driver is here but NVML lists no card; name one with --card SLUG")
    slugs = sorted({slug_for(c) for c in cards})
    if len(slugs) > 1:
        seen = "; ".join(f"{c.describe()} = {slug_for(c)}" for c in cards)
        raise CardIdentityError(f"this machine has different cards ({seen}); name one with --card SLUG")
    return cards[0]
