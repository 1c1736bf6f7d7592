"""Where each flake.lock entry comes from, checked against local snapshots of the inputs.

For an input whose locked revision the snapshot holds, the narHash is recomputed (`git archive REV`
unpacked, then `nix hash path`, the NAR hash of the tree as Nix's GitHub fetcher unpacks it) and
lastModified is the commit time. An input the snapshots cannot give (nixpkgs is too large to fetch here;
the stored uv2nix and pyproject.nix snapshots end before the locked commits) must equal, field for field,
the entry with the same revision in the flake.lock of an input verified that way (rev, narHash and
lastModified, which fix the content; the owner may be spelled otherwise there, e.g. after a repository
moved): the set that input was tested with. Prints one line per node and exits 1 when any node is neither.

    python3 docs/evidence/flake-inputs-2026-11-30/recompute.py [--mirror /work/.mirror] > recompute.log

The mirror layout is the `fetch` tool's: <owner>+<repo>/repo, a bare git repository.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
CONTENT = ("rev", "narHash", "lastModified")


def git(repo: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", "--git-dir", str(repo), *args], capture_output=True)


def recompute(repo: Path, rev: str) -> dict[str, Any] | None:
    """narHash and lastModified of `rev` from the snapshot, or None if it lacks the commit."""
    if git(repo, "cat-file", "-t", rev).returncode != 0:
        return None
    with tempfile.TemporaryDirectory() as scratch:
        archive = Path(scratch) / "src.tar"
        archive.write_bytes(git(repo, "archive", "--format=tar", rev).stdout)
        tree = Path(scratch) / "tree"
        with tarfile.open(archive) as tar:
            tar.extractall(tree, filter="tar")
        nar = subprocess.run(
            ["nix", "--extra-experimental-features", "nix-command", "hash", "path", str(tree)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    when = int(git(repo, "log", "-1", "--format=%ct", rev).stdout)
    return {"narHash": nar, "lastModified": when}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirror", type=Path, default=Path("/work/.mirror"))
    mirror = parser.parse_args().mirror

    nodes = json.loads((ROOT / "flake.lock").read_text())["nodes"]
    verified: dict[str, dict[str, Any]] = {}
    pending: dict[str, dict[str, Any]] = {}
    for name, node in nodes.items():
        if name == "root":
            continue
        locked = node["locked"]
        repo = mirror / f"{locked['owner']}+{locked['repo']}" / "repo"
        got = recompute(repo, locked["rev"]) if repo.is_dir() else None
        if got is None:
            pending[name] = locked
            continue
        same = got == {"narHash": locked["narHash"], "lastModified": locked["lastModified"]}
        print(
            f"{name}: {locked['owner']}/{locked['repo']}@{locked['rev'][:12]} recomputed "
            f"narHash {got['narHash']} lastModified {got['lastModified']}: {'EQUAL' if same else 'DIFFERS'}"
        )
        if same:
            verified[name] = {"locked": locked, "repo": repo}

    failed = [name for name in nodes if name != "root" and name not in verified and name not in pending]
    for name, locked in pending.items():
        source = None
        for parent, info in verified.items():
            shown = git(info["repo"], "show", f"{info['locked']['rev']}:flake.lock").stdout
            for entry in json.loads(shown or b"{}").get("nodes", {}).values():
                theirs = entry.get("locked", {})
                if all(theirs.get(key) == locked[key] for key in CONTENT):
                    source = f"{parent}, as {theirs.get('owner')}/{theirs.get('repo')}"
        if source is None:
            failed.append(name)
            print(f"{name}: {locked['owner']}/{locked['repo']}@{locked['rev'][:12]}: NOT VERIFIED")
        else:
            print(
                f"{name}: {locked['owner']}/{locked['repo']}@{locked['rev'][:12]}: rev, narHash and "
                f"lastModified equal to the entry in the flake.lock of {source} "
                "(not recomputed: no snapshot holds the commit)"
            )
    print(f"{len(nodes) - 1 - len(failed)} of {len(nodes) - 1} nodes accounted for")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
