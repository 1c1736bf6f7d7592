"""What changed between two builds, in the words a reader bisects by: the server arguments that differ
(`--attention-backend triton -> flashinfer`, from the launch commands, the serving-only `--host` and
`--port` left out), the patch series counted and named ("5 patches -> none (stock)", "5 patches -> 4
(without 0003-exact-verify-attention.patch)"), the other components that differ and that no argument
already says, and a hash (a tree digest, a digest of the server args) only where nothing else says what
changed in its part of the build."""

from __future__ import annotations

import re
import shlex

from bitexact.drift import Change

SERVING_ONLY = ("--host", "--port")  # where a server listens, never what it computes (DESIGN.md)
STOCK = "none (stock)"  # what `bitexact-server --build-info` writes for a tree without the series
HEX = re.compile(r"[0-9a-f]{32,}")
# Which changes explain a hash's change, by the start of their names (an argument of the launch
# command counts as `engine.launch_command`): the server args' digest changes with any argument, the
# patched tree's with the series or the release, the recipe's with its name or the arguments it makes.
EXPLAINED_BY = {
    "engine.server_args_sha256": ("engine.",),
    "build.sglang.tree": ("build.sglang",),
    "build.sglang.patched_files": ("build.sglang",),
    "build.recipe.sha256": ("build.recipe", "engine.launch_command"),
    "engine.model_files_sha256": ("engine.model",),
    "engine.env_vars_sha256": ("engine.env_vars",),  # no other component names the server's environment
}


def is_hash(name: str, value: str | None) -> bool:
    return name in EXPLAINED_BY or name.endswith("sha256") or bool(value and HEX.fullmatch(value))


def launch_options(command: str | None) -> dict[str, str]:
    """`--option value` pairs of a launch command (a flag alone maps to ""), the program before them
    left out; None or text that is not a command line gives {}."""
    try:
        words = shlex.split(command or "")
    except ValueError:
        return {}
    options: dict[str, str] = {}
    current: str | None = None
    for word in words:
        if word.startswith("--"):
            name, eq, value = word.partition("=")
            current = None if eq else name
            options[name] = value
        elif current is not None:
            options[current] = f"{options[current]} {word}".strip()
    return options


def _series(value: str | None) -> list[str] | None:
    if value is None:
        return None
    return [] if value == STOCK else value.split()


def patches_in_words(old: str | None, new: str | None) -> tuple[str, str]:
    """A patch series as a count, and what the newer one lacks or adds."""
    a, b = _series(old), _series(new)

    def count(series: list[str] | None) -> str:
        if series is None:
            return "-"
        return STOCK if not series else f"{len(series)} patch{'es' if len(series) != 1 else ''}"

    after = count(b)
    if a and b:
        gone, added = [p for p in a if p not in b], [p for p in b if p not in a]
        parts = [f"without {', '.join(gone)}"] if gone else []
        parts += [f"with {', '.join(added)}"] if added else []
        if not parts:
            parts = ["the same patches in another order"]
        after += f" ({'; '.join(parts)})"
    return count(a), after


def _short(value: str | None) -> str:
    return "-" if value is None else value[:12] if HEX.fullmatch(value) else value


def _within(name: str, prefix: str) -> bool:
    """`build.sglang.patches` is within `build.sglang`; `build.sglang-kernel` is not."""
    if prefix.endswith("."):
        return name.startswith(prefix)
    return name == prefix or name.startswith(prefix + ".")


def in_words(changes: list[Change]) -> list[tuple[str, str, str]]:
    """(what, before, after) for the changes between two builds, as the page and `--diff` show them."""
    rows: list[tuple[str, str, str, str]] = []  # (component it stands for, what, before, after)
    for name, old, new in changes:
        if name.endswith("launch_command"):
            a, b = launch_options(old), launch_options(new)
            for option in sorted(set(a) | set(b)):
                if option not in SERVING_ONLY and a.get(option) != b.get(option):
                    before, after = (x if x is None else x or "(set)" for x in (a.get(option), b.get(option)))
                    rows.append((name, option, before or "-", after or "-"))
        elif name.endswith(".patches"):
            rows.append((name, "patch series", *patches_in_words(old, new)))
    said = {(before, after) for _, _, before, after in rows}
    options = {what for _, what, _, _ in rows}
    for name, old, new in changes:
        if name.endswith(("launch_command", ".patches")) or is_hash(name, old or new):
            continue
        field = "--" + name.rsplit(".", 1)[-1].replace("_", "-")
        if (old or "-", new or "-") in said or (name.startswith("engine.") and field in options):
            continue  # the launch command already says it (`engine.attention_backend` is an argument)
        rows.append((name, name, old or "-", new or "-"))
    words = [shown for shown, _, _, _ in rows]  # only what is said in words explains a hash
    for name, old, new in changes:
        if not is_hash(name, old or new):
            continue
        family = EXPLAINED_BY.get(name, (name.rsplit(".", 1)[0],))
        if not any(_within(shown, prefix) for shown in words for prefix in family):
            rows.append((name, name, _short(old), _short(new)))
    return [(what, before, after) for _, what, before, after in rows]


def in_one_line(changes: list[Change]) -> str:
    return "; ".join(f"{what}: {a} -> {b}" for what, a, b in in_words(changes)) or "-"
