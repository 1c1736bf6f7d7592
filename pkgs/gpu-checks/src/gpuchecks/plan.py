"""The plan the runner runs: nix/lib/gpu-batteries.nix's `plan RECIPE`, as JSON (the flake writes it with
builtins.toJSON; a host without Nix reads the committed export, which an offline test keeps equal).

A plan has one kernel step, two references (the no-spec server's records of the short and long prompts)
and the batteries: each names the server variant it starts, the reference it compares with, the
`bitexact` commands it runs (placeholders @URL@, @REF@, ... filled here), what the stock tree must do
(`differs`, `passes`, or `not-run`), and, per command, how many tokens its longest request holds at
least (`commandNeeds`), so that the runner can leave out, with the reason, what the server it starts
cannot hold on this card."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCHEMA = 1
STOCK_EXPECTATIONS = ("differs", "passes", "not-run")
REFERENCE_KINDS = ("short", "long")
PLACEHOLDERS = (
    "URL",
    "RECIPE",
    "REF",
    "REF_LONG",
    "GOLDEN_DIR",
    "OUT",
    "MODEL_SNAPSHOT",
    "BUILD_INFO",
)


class PlanError(ValueError):
    """The plan file cannot be run: it names the file and what is wrong."""


@dataclass(frozen=True)
class Step:
    """One server step: a reference or a battery."""

    name: str
    what: str
    variant: str
    commands: tuple[tuple[str, ...], ...]
    kind: str  # "reference" or "battery"
    reference: str | None = None  # the short or long reference it compares with
    long_reference: bool = False  # also compared with the long reference (@REF_LONG@)
    stock: str = "not-run"
    command_needs: tuple[int | None, ...] = ()

    @property
    def references(self) -> tuple[str, ...]:
        """The references this step needs recorded before it runs."""
        wanted = [self.reference] if self.reference else []
        if self.long_reference:
            wanted.append("long")
        return tuple(dict.fromkeys(wanted))

    @property
    def uses_goldens(self) -> bool:
        """Whether its commands compare with the card's committed goldens (they name @GOLDEN_DIR@)."""
        return any("@GOLDEN_DIR@" in arg for command in self.commands for arg in command)


@dataclass(frozen=True)
class Plan:
    path: Path
    recipe: str
    kernels_name: str
    kernels_what: str
    references: dict[str, Step]
    batteries: tuple[Step, ...]
    golden_record_variant: str
    golden_record_commands: tuple[tuple[str, ...], ...]
    long_lengths: str

    @property
    def step_names(self) -> list[str]:
        """Every step of the plan in its order: the kernel step, the references, the batteries (the flake's
        checks are these names less the references, which show in the batteries that need them)."""
        refs = [self.references[kind].name for kind in REFERENCE_KINDS]
        return [self.kernels_name, *refs, *(b.name for b in self.batteries)]

    def step(self, name: str) -> Step:
        for step in [*self.references.values(), *self.batteries]:
            if step.name == name:
                return step
        raise KeyError(name)


def _need(data: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if key not in data:
        raise PlanError(f"{where} has no {key!r}")
    value = data[key]
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise PlanError(f"{where}: {key!r} is {type(value).__name__}, not {getattr(kind, '__name__', kind)}")
    return value


def _commands(data: dict[str, Any], where: str) -> tuple[tuple[str, ...], ...]:
    commands = _need(data, "commands", list, where)
    if not commands:
        raise PlanError(f"{where} runs no command")
    out = []
    for command in commands:
        if not isinstance(command, list) or not command or not all(isinstance(a, str) for a in command):
            raise PlanError(f"{where}: a command is not a non-empty list of strings: {command!r}")
        if command[0] != "bitexact":
            raise PlanError(f"{where}: a command starts {command[0]!r}; the plan runs `bitexact` only")
        out.append(tuple(command))
    return tuple(out)


def _command_needs(data: dict[str, Any], count: int, where: str) -> tuple[int | None, ...]:
    needs = _need(data, "commandNeeds", list, where)
    if len(needs) != count:
        raise PlanError(f"{where}: commandNeeds has {len(needs)} entries for {count} commands")
    for value in needs:
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise PlanError(f"{where}: commandNeeds holds {value!r}, not a positive whole number or null")
    return tuple(needs)


def _step(data: Any, kind: str, where: str) -> Step:
    if not isinstance(data, dict):
        raise PlanError(f"{where} is not an object")
    name = _need(data, "name", str, where)
    where = f"{where} ({name})"
    reference = data.get("reference")
    if reference is not None and reference not in REFERENCE_KINDS:
        raise PlanError(f"{where}: reference {reference!r} is none of {', '.join(REFERENCE_KINDS)}")
    stock = data.get("stock", "not-run") if kind == "battery" else "not-run"
    if stock not in STOCK_EXPECTATIONS:
        raise PlanError(f"{where}: stock {stock!r} is none of {', '.join(STOCK_EXPECTATIONS)}")
    commands = _commands(data, where)
    return Step(
        name=name,
        what=str(data.get("what", "")),
        variant=_need(data, "variant", str, where),
        commands=commands,
        kind=kind,
        reference=reference,
        long_reference=bool(data.get("longReference", False)),
        stock=stock,
        command_needs=_command_needs(data, len(commands), where),
    )


def parse(data: Any, path: Path) -> Plan:
    where = f"plan {path}"
    if not isinstance(data, dict):
        raise PlanError(f"{where} is not a JSON object")
    schema = data.get("schema")
    if schema != SCHEMA or isinstance(schema, bool):
        raise PlanError(
            f"{where} has schema {schema!r}; this runner reads schema {SCHEMA}: export the plan with this "
            "checkout's nix/lib/gpu-batteries.nix (docs/gpu-checks.md)"
        )
    kernels = _need(data, "kernels", dict, where)
    references_data = _need(data, "references", dict, where)
    references = {}
    for kind in REFERENCE_KINDS:
        if kind not in references_data:
            raise PlanError(f"{where}: references has no {kind!r}")
        references[kind] = _step(references_data[kind], "reference", f"{where}: reference {kind}")
    batteries = tuple(
        _step(b, "battery", f"{where}: battery {i}")
        for i, b in enumerate(_need(data, "batteries", list, where))
    )
    record = _need(data, "goldenRecord", dict, where)
    plan = Plan(
        path=path,
        recipe=_need(data, "recipe", str, where),
        kernels_name=_need(kernels, "name", str, f"{where}: kernels"),
        kernels_what=str(kernels.get("what", "")),
        references=references,
        batteries=batteries,
        golden_record_variant=_need(record, "variant", str, f"{where}: goldenRecord"),
        golden_record_commands=_commands(record, f"{where}: goldenRecord"),
        long_lengths=_need(data, "longLengths", str, where),
    )
    names = plan.step_names
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise PlanError(f"{where}: step names given twice: {', '.join(twice)}")
    for battery in batteries:
        if battery.reference is None and battery.long_reference:
            raise PlanError(f"{where}: battery {battery.name} has longReference but no reference")
    return plan


def load(path: Path) -> Plan:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise PlanError(f"plan {path}: cannot read it: {error.strerror}") from None
    except UnicodeDecodeError:
        raise PlanError(f"plan {path} is not UTF-8 text") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise PlanError(f"plan {path} is not JSON: {error}") from None
    return parse(data, path)


def fill(command: tuple[str, ...] | list[str], values: dict[str, str]) -> list[str]:
    """The command with its @NAME@ placeholders replaced; one left unfilled is an error, never passed on."""
    out = []
    for arg in command:
        for key, value in values.items():
            arg = arg.replace(f"@{key}@", value)
        left = [name for name in PLACEHOLDERS if f"@{name}@" in arg]
        if left:
            raise PlanError(f"command {' '.join(command)}: placeholder @{left[0]}@ has no value here")
        out.append(arg)
    return out
