"""Every Nix file parses, flake.lock is well-formed and locks exactly flake.nix's inputs, and the
flake's output shape evaluates offline (nixpkgs is not fetched for it)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from checkhelpers.flake_eval import SYSTEM, flake_eval

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [
    pytest.mark.nix,
    pytest.mark.skipif(shutil.which("nix-instantiate") is None, reason="nix-instantiate not on PATH"),
]


def nix_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.nix"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return [ROOT / name for name in listed if (ROOT / name).is_file()]


def lock() -> dict[str, Any]:
    return json.loads((ROOT / "flake.lock").read_text())


def flake_inputs() -> dict[str, Any]:
    done = subprocess.run(
        ["nix-instantiate", "--eval", "--strict", "--json", "-E", f"(import {ROOT}/flake.nix).inputs"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_every_nix_file_parses() -> None:
    files = nix_files()
    assert ROOT / "flake.nix" in files and ROOT / "nix" / "lib" / "default.nix" in files
    for path in files:
        done = subprocess.run(
            ["nix-instantiate", "--parse", str(path)], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, f"{path.relative_to(ROOT)}: {done.stderr}"


def test_flake_lock_nodes_are_complete_github_locks() -> None:
    data = lock()
    assert data["version"] == 7 and data["root"] == "root"
    nodes = data["nodes"]
    for name, node in nodes.items():
        if name == "root":
            continue
        locked = node["locked"]
        assert locked["type"] == "github", name
        assert re.fullmatch(r"[0-9a-f]{40}", locked["rev"]), name
        assert re.fullmatch(r"sha256-[A-Za-z0-9+/]{43}=", locked["narHash"]), name
        assert isinstance(locked["lastModified"], int) and locked["lastModified"] > 1_600_000_000, name
        assert (locked["owner"], locked["repo"]) == (node["original"]["owner"], node["original"]["repo"]), (
            name
        )
        for target in node.get("inputs", {}).values():
            # A follows is a path of root inputs; a plain string names another node.
            if isinstance(target, list):
                assert target and target[0] in nodes["root"]["inputs"], (name, target)
            else:
                assert target in nodes, (name, target)


def test_every_flake_input_is_locked_as_declared() -> None:
    inputs = flake_inputs()
    nodes = lock()["nodes"]
    root_inputs = nodes["root"]["inputs"]
    assert set(root_inputs) == set(inputs)
    for name, spec in inputs.items():
        node = nodes[root_inputs[name]]
        match = re.fullmatch(r"github:([^/]+)/([^/]+)(?:/(.+))?", spec["url"])
        assert match, spec["url"]
        owner, repo, ref = match.groups()
        original = node["original"]
        assert (original["owner"], original["repo"], original.get("ref")) == (owner, repo, ref), name
        follows = {sub: [target["follows"]] for sub, target in spec.get("inputs", {}).items()}
        # Inputs flake.nix does not make follow are the input's own (a node of their own in the lock).
        declared = {sub: target for sub, target in node.get("inputs", {}).items() if isinstance(target, list)}
        assert declared == follows, name


def test_nixpkgs_is_shared_by_every_input_but_nix2container() -> None:
    nodes = lock()["nodes"]
    for name, node in nodes.items():
        if "nixpkgs" in node.get("inputs", {}) and name not in ("root", "nix2container"):
            assert node["inputs"]["nixpkgs"] == ["nixpkgs"], name
    # nix2container keeps the nixpkgs its skopeo patch and vendorHash were tested with: a node of its
    # own, as its flake.nix declares it (github:NixOS/nixpkgs, no ref). That its locked revision is
    # the one in nix2container's own flake.lock is checked against the real file by
    # lab/upstream_eval (the snapshot is not reachable from CI).
    own = nodes["nix2container"]["inputs"]["nixpkgs"]
    assert isinstance(own, str) and own != nodes["root"]["inputs"]["nixpkgs"], own
    assert nodes[own]["original"] == {"owner": "NixOS", "repo": "nixpkgs", "type": "github"}


@pytest.mark.skipif(
    shutil.which("nix") is None or not (ROOT / ".git").exists(), reason="needs nix and a git checkout"
)
def test_output_shape_evaluates_offline_and_pins_check_is_present() -> None:
    pins = json.loads((ROOT / "nix" / "pins" / "sglang-src.json").read_text())
    checks = flake_eval(f"checks.{SYSTEM}")
    assert checks.returncode == 0, checks.stderr
    names = json.loads(checks.stdout)
    assert {"pins", "nix-lib", "deep-gemm-fenced"} <= set(names)
    # The patch-series check needs the pinned source; it joins once the narHash is filled.
    assert ("sglang-patches-apply" in names) == ("narHash" in pins)
    packages = flake_eval(f"packages.{SYSTEM}")
    assert packages.returncode == 0, packages.stderr
    # The outputs README and docs/nix.md name (checks/offline/test_readme_commands.py checks README's).
    assert {
        "server", "deep-gemm", "sglang", "sglang-router", "server-env", "cpu-checks", "lock", "bitexact",
        "image", "image-dev", "image-layer-sizes", "weights", "seed-weights",
    } <= set(json.loads(packages.stdout))  # fmt: skip
    apps = flake_eval(f"apps.{SYSTEM}")
    assert apps.returncode == 0, apps.stderr
    assert set(json.loads(apps.stdout)) == {"server", "lock", "record-golden"}
