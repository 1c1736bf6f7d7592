"""Golden families: cards whose served bits are the same for a recipe, so that one golden serves them all.

Bits depend on what the kernels read of the card (compute capability, SM count, L2 size), and which of
those a recipe's kernels read depends on the recipe, so a family is per recipe, never per card pair. The
families live beside the goldens, in `<golden dir>/families.json`:

    {"schema": 1, "families": [
      {"recipes": ["e2e-tiny-hybrid", "e2e-tiny-hybrid-long"],   # the golden names it serves
       "golden": "h200",                                          # the card whose golden it is
       "hardware": {"compute_capability": "9.0", "sm_count": 132},  # what every member must have
       "members": {"h100-sxm5-80gb": {"same_bits_evidence": {...}}},
       "pending": {"some-card": "pending an H200 record of build X"}}]}

A card checks against its own golden when it has one. Else, for a recipe whose family lists the card as a
member, it checks against the family's golden, after its hardware is held to the family's (each property
named where it differs: refused, never guessed). A card the family lists as pending is told why and what
would settle it. Every member carries `same_bits_evidence`: the records of the same build (or a named chain
of builds) that compared equal. Software (driver, CUDA) is not a family property: it goes to the history,
where a change is checked, not blocked."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import exactformats

from bitexact import strictjson
from bitexact.errors import GoldenError
from bitexact.names import checked_name

FILE = "families.json"
SCHEMA = 1
HARDWARE = ("compute_capability", "sm_count", "l2_mib")


@dataclass(frozen=True)
class Family:
    recipes: tuple[str, ...]
    golden: str
    hardware: dict[str, Any]
    members: dict[str, dict[str, Any]]
    pending: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Resolved:
    """Which golden a check of CARD uses: the card's own, or its family's (recorded on `recorded_by`)."""

    card: str
    recorded_by: str
    family: Family | None

    @property
    def note(self) -> str:
        if self.family is None:
            return ""
        return (
            f"card {self.card} checks against the golden card {self.recorded_by} recorded "
            "(one family for this recipe, checks/golden/families.json)"
        )


def _fail(path: Path, what: str) -> GoldenError:
    return GoldenError(
        f"golden families {path}: {what}; fix the file (docs/cards.md says what each field holds)"
    )


def load(golden_dir: Path) -> list[Family]:
    """The families of a golden dir (none without the file); GoldenError naming the file and the field."""
    path = golden_dir / FILE
    if not path.exists():
        return []
    try:
        text = exactformats.read_text(path, "golden families", "the families file (docs/cards.md)")
    except exactformats.FormatError as exc:
        raise GoldenError(str(exc)) from None
    try:
        data = strictjson.loads(text)
    except strictjson.StrictJSONError as exc:
        raise _fail(path, f"not standard JSON ({exc})") from None
    if not isinstance(data, dict):
        raise _fail(path, "not a JSON object")
    problem = exactformats.schema_problem(
        data.get("schema"),
        (SCHEMA,),
        f"golden families {path}",
        reader="bitexact",
        older="write it in the form docs/cards.md gives",
    )
    if problem is not None:
        raise GoldenError(problem)
    families = []
    for at, raw in enumerate(data.get("families", [])):
        where = f"families[{at}]"
        try:
            recipes = tuple(checked_name(r, f"{where}.recipes") for r in raw["recipes"])
            golden = checked_name(raw["golden"], f"{where}.golden")
            hardware = dict(raw["hardware"])
            members = {checked_name(c, f"{where}.members"): dict(e) for c, e in raw["members"].items()}
            pending = {checked_name(c, f"{where}.pending"): str(w) for c, w in raw.get("pending", {}).items()}
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise _fail(path, f"{where} is malformed ({exc!r})") from None
        unknown = sorted(set(hardware) - set(HARDWARE))
        if unknown:
            raise _fail(
                path, f"{where}.hardware names {unknown}; a family holds its members to {list(HARDWARE)}"
            )
        for card, entry in members.items():
            if card != golden and not entry.get("same_bits_evidence"):
                raise _fail(
                    path, f"{where}: member {card} carries no same_bits_evidence (records compared equal)"
                )
        families.append(Family(recipes, golden, hardware, members, pending))
    return families


def resolve(golden_dir: Path, card: str, recipe: str, properties: dict[str, Any] | None) -> Resolved:
    """The golden a check of CARD for RECIPE uses. `properties`: what is known of the running card
    (compute_capability, sm_count, l2_mib: NVML and the card table), None when nothing is."""
    if (golden_dir / card / f"{recipe}.json").exists():
        return Resolved(card, card, None)
    for family in load(golden_dir):
        if recipe not in family.recipes:
            continue
        if card in family.pending:
            raise GoldenError(
                f"card {card} has no golden of {recipe}, and its membership of the family recorded on "
                f"{family.golden} is {family.pending[card]}; record this card's own golden (nix run "
                ".#record-golden, or bitexact golden record) or settle the family (docs/cards.md)"
            )
        if card not in family.members or card == family.golden:
            continue
        if properties is None:
            raise GoldenError(
                f"card {card} is a member of the family recorded on {family.golden} for {recipe}, but its "
                "hardware cannot be read here to hold it to the family's (gpuhost, the card reader, is not "
                "installed: pip install ./pkgs/formats ./pkgs/gpuhost); check with --golden FILE to name the "
                "golden yourself"
            )
        differ = [
            f"{name} {properties.get(name)!r}, not the family's {want!r}"
            for name, want in family.hardware.items()
            if properties.get(name) != want
        ]
        if differ:
            raise GoldenError(
                f"card {card} is listed in the family recorded on {family.golden} for {recipe}, but it has "
                f"{'; '.join(differ)}: its bits are not the family's; record its own golden"
            )
        return Resolved(card, family.golden, family)
    for family in load(golden_dir):
        if recipe in family.recipes and card not in family.members:
            members = ", ".join(sorted(family.members))
            hardware = ", ".join(f"{k} {v!r}" for k, v in family.hardware.items())
            seen = ", ".join(f"{k} {(properties or {}).get(k)!r}" for k in family.hardware)
            raise GoldenError(
                f"card {card} has no golden of {recipe} and is no member of its family (recorded on "
                f"{family.golden}; members {members}; {hardware}; this card: {seen}): its bits may differ; "
                "record its own golden (nix run .#record-golden, or bitexact golden record)"
            )
    return Resolved(card, card, None)
