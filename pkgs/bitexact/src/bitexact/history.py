"""The drift history of a card: one JSON line per golden record and golden check, appended beside the
card's goldens (`<golden dir>/<card>/history.jsonl`). Each line holds what was built (the components:
engine as it reports itself, the build the launcher describes, the host's driver), when, which golden,
and the verdict with the first divergence, the margin there and the prompts it touched. Lines are
appended whole (one write each), so a crash loses at most the line being written, and a torn or
unreadable line is skipped with a note, never fatal: the history is evidence, not a gate."""

from __future__ import annotations

import datetime
import json
import sys
from pathlib import Path
from typing import Any

from exactformats import schema_problem

from bitexact import strictjson
from bitexact.errors import UsageError
from bitexact.files import append_line, blocked_folder, dumps, path_state, read_text
from bitexact.results import flatten, run_key

KIND = "bitexact-history"
SCHEMA = 1
FILE_NAME = "history.jsonl"
# Identity fields that say where an engine is or when it started, not what it computes.
WHERE_FIELDS = ("url", "started")


def history_path(golden_file: Path) -> Path:
    """The history beside a golden: `<golden dir>/<card>/history.jsonl`."""
    return golden_file.parent / FILE_NAME


def read_build_info(path: Path | None) -> dict[str, str]:
    """The launcher's description of the build (`bitexact-server --build-info`), flat strings."""
    if path is None:
        return {}
    text = read_text(path, "--build-info", "the JSON `bitexact-server --build-info` prints")
    try:
        data = strictjson.loads(text)
    except strictjson.StrictJSONError as error:
        raise UsageError(
            f"--build-info {path}: {error}; write it with `bitexact-server --build-info > FILE`"
        ) from None
    if not isinstance(data, dict) or not all(isinstance(v, str | int | float | bool) for v in data.values()):
        raise UsageError(
            f"--build-info {path}: must be one JSON object of names to strings (as `bitexact-server "
            "--build-info` prints)"
        )
    return {str(k): str(v) for k, v in data.items()}


def components(
    identity: dict[str, Any],
    build_info: dict[str, str],
    gpu: dict[str, Any],
    *,
    bitexact_version: str,
    build_id: str | None,
) -> dict[str, str]:
    """Everything known about what computed the values, flat `name: value`, for diffing two builds:
    `engine.*` as the engine reports itself, `build.*` as the launcher describes its build, `host.*` the
    driver and CUDA of this machine's NVML (for engines on this machine), `bitexact`, `build_id`."""
    found: dict[str, str] = {"bitexact": bitexact_version}
    if build_id:
        found["build_id"] = build_id
    what = flatten({k: v for k, v in identity.items() if k not in WHERE_FIELDS}, "engine")
    found.update({k: str(v) for k, v in what.items() if v is not None and not isinstance(v, list)})
    found.update({f"build.{k}": v for k, v in build_info.items()})
    for key in ("driver", "cuda_driver"):
        if gpu.get(key):
            found[f"host.{key}"] = str(gpu[key])
    cards = gpu.get("cards") or []
    if cards and isinstance(cards[0], dict) and cards[0].get("name"):
        found["host.card"] = str(cards[0]["name"])
    return found


def build_label(found: dict[str, str]) -> str:
    """A short name for a set of components: equal labels, equal builds (as far as they were described)."""
    return run_key(found)[:12]


def first_divergence(comparisons: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The earliest first divergence over the prompts (the golden's margin there), or None when equal."""
    differing = [c for c in comparisons if not c["equal"]]
    if not differing:
        return None
    first = min(differing, key=lambda c: c["first_divergence"])
    return {
        "prompt": first["prompt_id"],
        "position": first["first_divergence"],
        "differs_in": first.get("differs_in"),
        "margin": first.get("margin_b"),
        "token_flip": not first["tokens_equal"],
    }


def entry(
    *,
    verdict: str,
    card: str,
    recipe: str,
    variant: str,
    engine: str,
    golden: dict[str, Any],
    found: dict[str, str],
    summary: dict[str, Any] | None,
    prompts: int,
    golden_prompts: int | None = None,
) -> dict[str, Any]:
    """One history line: RECORDED (a golden was written) or EQUAL/DIFFERENT (a check against it).
    `golden_prompts`: how many prompts the golden holds, when a check compared fewer (a partial check:
    its EQUAL speaks for those prompts only, and the history page says so)."""
    comps = summary["comparisons"] if summary else []
    whole = golden_prompts if golden_prompts is not None else prompts
    partial = {"golden_prompts": whole} if whole != prompts else {}
    return {
        **partial,
        "kind": KIND,
        "schema": SCHEMA,
        "at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "verdict": verdict,
        "card": card,
        "recipe": recipe,
        "variant": variant,
        "engine": engine,
        "golden": golden,
        "build": {"label": build_label(found), "components": found},
        "prompts": prompts,
        "equal": summary["equal"] if summary else prompts,
        "tokens_differ": summary["tokens_differ"] if summary else 0,
        "first_divergence": first_divergence(comps),
        "touched": [c["prompt_id"] for c in comps if not c["equal"]],
    }


def line_text(line: dict[str, Any]) -> str:
    """A history line as the file holds it: one JSON object and its newline."""
    return dumps(line, sort_keys=True) + "\n"


def append(path: Path, line: dict[str, Any]) -> None:
    append_line(
        path,
        line_text(line),
        "the history's earlier lines are kept; pass --history FILE to write it elsewhere, or --no-history",
        option="--history",
    )


VERDICTS = ("RECORDED", "EQUAL", "DIFFERENT")


def _is(value: Any, *kinds: type) -> bool:
    return isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds)


def shape_problem(item: Any) -> str | None:
    """Why a line of the right kind is not of the shape the history page reads, in words; None when it
    is. A history is evidence, not a gate: such a line is skipped and named, never fatal."""
    if not isinstance(item, dict) or item.get("kind") != KIND:
        return "not a history line"
    schema = schema_problem(
        item.get("schema"),
        (SCHEMA,),
        "a history line",
        reader="bitexact",
        older="it is kept, and this bitexact cannot show it",
    )
    if schema is not None:
        return schema
    for key, kinds in (("at", (str,)), ("card", (str,)), ("recipe", (str,)), ("variant", (str,)),
                       ("engine", (str,)), ("prompts", (int,)), ("equal", (int,)),
                       ("tokens_differ", (int,))):  # fmt: skip
        if not _is(item.get(key), *kinds):
            return f"'{key}' is {json.dumps(item.get(key))}"
    if item.get("verdict") not in VERDICTS:
        return f"'verdict' is {json.dumps(item.get('verdict'))}, not one of {', '.join(VERDICTS)}"
    try:
        datetime.datetime.fromisoformat(item["at"])
    except ValueError:
        return f"'at' is {json.dumps(item['at'])}, not a time (ISO 8601, as bitexact writes it)"
    build = item.get("build")
    if not isinstance(build, dict) or not _is(build.get("label"), str):
        return "'build' has no label"
    parts = build.get("components")
    if not isinstance(parts, dict) or not all(_is(v, str) for v in parts.values()):
        return "'build.components' is not an object of names to strings"
    golden = item.get("golden")
    if not isinstance(golden, dict) or not all(
        golden.get(k) is None or _is(golden.get(k), str) for k in ("path", "digest", "recorded", "build")
    ):
        return "'golden' is not an object of path, digest, recorded and build"
    touched = item.get("touched")
    if not isinstance(touched, list) or not all(_is(t, str) for t in touched):
        return "'touched' is not a list of prompt ids"
    first = item.get("first_divergence")
    if first is not None and not (
        isinstance(first, dict)
        and _is(first.get("prompt"), str)
        and _is(first.get("position"), int)
        and (first.get("differs_in") is None or _is(first.get("differs_in"), str))
        and (first.get("margin") is None or _is(first.get("margin"), int, float))
    ):
        return "'first_divergence' is not an object of prompt, position, differs_in and margin"
    return _count_problem(item)


def _count_problem(item: dict[str, Any]) -> str | None:
    """Why a line's counts cannot be what a check found (more prompts equal than there were, a verdict
    of EQUAL with prompts that differ), in words; None when they agree. A line of the right shape whose
    counts contradict its verdict would otherwise read as NO DRIFT, or as drift that never was."""
    prompts, equal, tokens = item["prompts"], item["equal"], item["tokens_differ"]
    first, touched, verdict = item["first_divergence"], item["touched"], item["verdict"]
    if prompts < 1 or not 0 <= equal <= prompts or not 0 <= tokens <= prompts - equal:
        return (
            f"its counts are impossible ({prompts} prompts, {equal} equal, {tokens} differing in token ids)"
        )
    whole = item.get("golden_prompts", prompts)
    if not _is(whole, int) or whole < prompts:
        return f"'golden_prompts' is {json.dumps(whole)}: not a count of at least the {prompts} checked"
    if first is not None and first["position"] < 0:
        return f"'first_divergence' is at position {first['position']}, before the first token"
    differ = verdict == "DIFFERENT"
    if differ != (equal < prompts) or differ != (first is not None) or len(touched) != prompts - equal:
        return (
            f"its verdict {verdict} disagrees with its counts ({equal} of {prompts} prompts equal, "
            f"{len(touched)} touched, {'a' if first else 'no'} first divergence)"
        )
    return None


def load(path: Path) -> list[dict[str, Any]]:
    """Every readable line of a history, in the order written. A torn last line (a crash mid-write) and
    lines that are not history lines of the shape this bitexact reads are skipped, each named on
    stderr."""
    text = read_text(path, "--history", "a history.jsonl written by `bitexact golden check`")
    if text and not text.endswith("\n"):
        print(f"bitexact: {path}: the last line is torn (a crash mid-write); it is skipped", file=sys.stderr)
        text = text[: text.rfind("\n") + 1]
    found = []
    for number, line in strictjson.lines(text):
        try:
            item = strictjson.loads(line)
        except strictjson.StrictJSONError:
            item = None
        why = shape_problem(item)
        if why is not None:
            print(f"bitexact: {path}:{number}: {why}; skipped", file=sys.stderr)
            continue
        found.append(item)
    return found


def check_target(path: Path, golden_file: Path) -> None:
    """A history line may go to `path`: not the golden itself, not a directory, not a file that holds
    anything but history lines (a golden, a results file). Checked before a run, so that a golden is
    never written by a run that then cannot append its line."""
    if path.absolute() == golden_file.absolute() or (
        path.exists() and golden_file.exists() and path.samefile(golden_file)
    ):
        raise UsageError(
            f"--history {path} is the golden itself: a history line appended to it would corrupt it; "
            f"give the history its own file (default: {history_path(golden_file)})"
        )
    state = path_state(path)
    if state == "missing":
        blocked = blocked_folder(path)
        if blocked is not None:
            raise UsageError(f"--history {path}: {blocked}; give a history file in a folder")
        return
    if state != "file":
        raise UsageError(
            f"--history {path} is {'a directory' if state == 'directory' else state}; give the history "
            f"file (e.g. {path / FILE_NAME if state == 'directory' else FILE_NAME})"
        )
    text = read_text(path, "--history", "a history.jsonl written by `bitexact golden check`")
    first = next(iter(strictjson.lines(text)), None)
    if first is None:
        return
    try:
        item = strictjson.loads(first[1])
    except strictjson.StrictJSONError:
        item = None
    if not isinstance(item, dict) or item.get("kind") != KIND:
        what = (
            f"a {item['kind']} file"
            if isinstance(item, dict) and isinstance(item.get("kind"), str)
            else ("not a history")
        )
        raise UsageError(
            f"--history {path} is {what} (its first line is no history line): a history line appended "
            "to it would corrupt it; give a history file, or a new one"
        )


def component_changes(old: dict[str, str], new: dict[str, str]) -> list[tuple[str, str | None, str | None]]:
    """(name, before, after) for every component that differs, absent ones as None, sorted by name."""
    return [(k, old.get(k), new.get(k)) for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
