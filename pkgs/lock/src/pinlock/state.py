"""Whether each pin is there for the recipe it serves: ("pinned" | "ABSENT" | "MALFORMED", why).

A pin reads as pinned only when it is the recipe's (the same repo, the same rev) and its hash has the form
Nix accepts (nix/lib/pins.nix: `sha256-` and 44 base64 characters): `narHash: null`, a source pin left at
the old rev after the recipe's engine moved, a Cargo pin of another commit or lock paths leaving their
folder are not pinned. `status` prints these; the lock steps skip only what reads as pinned."""

from __future__ import annotations

import json
from pathlib import Path, PurePosixPath
from typing import Any

from pinlock import hf
from pinlock.pins import CARGO_LOCKS, CARGO_PIN, MANIFESTS, SRC_PIN, STUBS_PIN, PinError, is_sri, read_json
from pinlock.recipe import Source

PINNED, ABSENT, MALFORMED = "pinned", "ABSENT", "MALFORMED"
State = tuple[str, str]
SRC_KEYS = {"owner", "repo", "rev", "narHash"}
CARGO_KEYS = {"rev", "locks", "outputHashes"}


def _read(root: Path, rel: Path) -> tuple[Any, State | None]:
    """The pin file's data, or the state that says why there is none to read."""
    try:
        data = read_json(root / rel)
    except PinError as error:
        return None, (MALFORMED, f"{error}")
    if data is None:
        return None, (ABSENT, f"{rel} does not exist")
    if not isinstance(data, dict):
        return None, (MALFORMED, f"{rel} is not a JSON object; delete it and run `nix run .#lock`")
    return data, None


def src_identity(root: Path) -> Source | None:
    """The owner/repo@rev the source pin holds, when it holds one (whatever its hash)."""
    try:
        pin = read_json(root / SRC_PIN)
    except PinError:
        return None
    if not isinstance(pin, dict) or not all(isinstance(pin.get(k), str) for k in ("owner", "repo", "rev")):
        return None
    return Source(pin["owner"], pin["repo"], pin["rev"])


def src(root: Path, engine: Source) -> State:
    """nix/pins/sglang-src.json against the recipe's engine."""
    pin, why = _read(root, SRC_PIN)
    if why:
        return why
    fix = "delete it and run `nix run .#lock -- src`"
    if set(pin) - SRC_KEYS:
        return MALFORMED, f"{SRC_PIN} has keys {sorted(set(pin) - SRC_KEYS)} beyond {sorted(SRC_KEYS)}: {fix}"
    held = src_identity(root)
    if held is None:
        return MALFORMED, f"{SRC_PIN}: owner, repo and rev must be strings: {fix}"
    problem = hf.revision_problem(held.rev)
    if problem:  # a rev with white space, a digit too many: shortened, it would read as the recipe's
        return MALFORMED, f"{SRC_PIN}: rev: {problem}: {fix}"
    if held != engine:
        # Revisions that differ only after their 12th digit would read alike shortened: shown in full.
        shown = (str(held), str(engine)) if str(held) != str(engine) else (held.identity, engine.identity)
        fix = "`nix run .#lock -- src`"
        return ABSENT, f"{SRC_PIN} pins {shown[0]}, the recipe's engine is {shown[1]}: {fix}"
    if "narHash" not in pin:
        return ABSENT, f"{SRC_PIN} has no narHash yet"
    if not is_sri(pin["narHash"]):
        shown = json.dumps(pin["narHash"])
        return MALFORMED, f"{SRC_PIN}: narHash {shown} is not an SRI sha256 (sha256-...=): {fix}"
    return PINNED, ""


def _lock_paths(pin: dict[str, Any]) -> list[str] | None:
    """The pin's lock files, when each is a relative path to a Cargo.lock below the locks folder."""
    locks = pin.get("locks")
    if not isinstance(locks, list) or not locks or not all(isinstance(p, str) for p in locks):
        return None
    for rel in locks:
        parts = PurePosixPath(rel).parts
        if rel.startswith("/") or ".." in parts or "\\" in rel or not parts or parts[-1] != "Cargo.lock":
            return None
    return list(locks)


def cargo(root: Path, engine: Source) -> tuple[State, State]:
    """nix/pins/sglang-cargo.json: (its outputHashes, its committed lock files), for the engine's rev."""
    pin, why = _read(root, CARGO_PIN)
    if why:
        return why, why
    fix = "delete it and run `nix run .#lock -- cargo`"
    if set(pin) - CARGO_KEYS:
        bad = (MALFORMED, f"{CARGO_PIN} has keys {sorted(set(pin) - CARGO_KEYS)} beyond {sorted(CARGO_KEYS)}")
        return bad, bad
    if pin.get("rev") != engine.rev:
        stale = (ABSENT, f"{CARGO_PIN} was written for {pin.get('rev')!r}, the recipe's engine is {engine}")
        return stale, stale
    hashes = pin.get("outputHashes")
    if hashes is None:
        hashes_state: State = (ABSENT, f"{CARGO_PIN} has no outputHashes")
    elif not isinstance(hashes, dict) or not all(is_sri(h) for h in hashes.values()):
        hashes_state = (MALFORMED, f"{CARGO_PIN}: outputHashes must map names to SRI sha256 hashes: {fix}")
    else:
        hashes_state = (PINNED, "")
    locks = _lock_paths(pin)
    if locks is None:
        locks_state: State = (MALFORMED, f"{CARGO_PIN}: locks must list relative paths of Cargo.lock files")
    else:
        absent = [p for p in locks if not (root / CARGO_LOCKS / p).is_file()]
        locks_state = (ABSENT, f"{CARGO_LOCKS}/ lacks {absent}") if absent else (PINNED, "")
    return hashes_state, locks_state


def manifest(root: Path, repo: str, revision: str) -> State:
    """The weights manifest of repo@revision in the checkout."""
    rel = MANIFESTS / hf.manifest_filename(repo)
    fix = f"delete it and run `nix run .#lock -- weights {repo}@{revision}`"
    data, why = _read(root, rel)
    if why:
        return why[0], why[1] + (f" ({fix})" if why[0] == MALFORMED else "")
    try:
        hf.validate_manifest(data, str(rel))
    except hf.ManifestError as error:
        return MALFORMED, f"{error} ({fix})"
    if data["repo"] != repo:
        return MALFORMED, f"{rel} is the manifest of {data['repo']}, not {repo} ({fix})"
    if data["revision"] != revision:
        return ABSENT, f"{rel} pins {data['revision'][:12]}, not {revision[:12]}"
    return PINNED, ""


def stubs(root: Path) -> tuple[dict[str, Any], str]:
    """The wheel-stub pins ({name: {version, url, hash}}) and why they cannot be read ("" when they can)."""
    try:
        pinned = read_json(root / STUBS_PIN)
    except PinError as error:
        return {}, str(error)
    if pinned is None:
        return {}, ""
    if not isinstance(pinned, dict) or not all(isinstance(e, dict) for e in pinned.values()):
        return {}, f"{STUBS_PIN} must map package names to {{version, url, hash}} objects"
    return pinned, ""


def stub(entry: Any, version: str) -> State:
    """One wheel-stub pin against the version uv.lock holds."""
    if not isinstance(entry, dict) or entry.get("version") != version:
        return ABSENT, ""
    if not isinstance(entry.get("url"), str) or not is_sri(entry.get("hash")):
        return MALFORMED, f"{STUBS_PIN}: its url must be a string and its hash an SRI sha256"
    return PINNED, ""
