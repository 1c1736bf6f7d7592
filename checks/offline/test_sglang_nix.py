"""pkgs/sglang/default.nix evaluated with the real Nix and allow-import-from-derivation = false, against
recording doubles of the nixpkgs functions it calls (fetchFromGitHub's double is a real fixed-output
derivation, so reading the fetched tree at evaluation time would be import-from-derivation): the Cargo
locks come from the committed pins, one importCargoLock each with only its own git hashes, joined for
cargoSetupHook; absent locks stop evaluation with one line naming the lock command."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from checkhelpers.hfcache_support import NIX_CONFIG, NIXPKGS_DOUBLES, nix_str

pytestmark = pytest.mark.nix

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "nix" / "lib" / "tests" / "fixtures"
LOCK_HINT = "run `nix run .#lock` on a machine with network access"


def sglang(pins: Path, what: str) -> subprocess.CompletedProcess[str]:
    expr = f"""
let
  d = {NIXPKGS_DOUBLES};
  lib = d.lib // {{
    getExe = p: "${{p}}/bin/${{p.meta.mainProgram}}";
    concatStringsSep = builtins.concatStringsSep;
  }};
  # A real fixed-output derivation (never built): its outPath has context, so reading under it at
  # evaluation time is import-from-derivation.
  fetchFromGitHub = args: derivation {{
    name = "source";
    system = "builtin";
    builder = "builtin:fetchurl";
    url = "https://example.invalid/${{args.owner}}/${{args.repo}}/${{args.rev}}.tar.gz";
    outputHashMode = "recursive";
    outputHash = args.hash;
  }} // {{ inherit (args) rev; }};
  pkgs = {{
    inherit fetchFromGitHub;
    cargo = "/fake-store/cargo";
    rustc = "/fake-store/rustc";
    autoPatchelfHook = "/fake-store/auto-patchelf-hook";
    buildPackages.protobuf = {{ outPath = "/fake-store/protobuf"; meta.mainProgram = "protoc"; }};
    rustPlatform = {{
      importCargoLock = args: {{
        kind = "vendor";
        lockText = builtins.readFile args.lockFile;
        inherit (args) outputHashes;
      }};
      cargoSetupHook = "/fake-store/cargo-setup-hook";
    }};
    symlinkJoin = args: {{ kind = "join"; inherit (args) name paths; }};
  }};
  locked = {{
    version = "0.5.20";
    overrideAttrs = f: f {{ passthru = {{ }}; }};
  }};
  s = import ./pkgs/sglang/default.nix {{
    inherit lib pkgs locked;
    pyprojectHook = "/fake-store/pyproject-hook";
    resolveBuildSystem = spec: map (n: "/fake-store/" + n) (builtins.attrNames spec);
    blib = import ./nix/lib;
    pinsDir = /. + {nix_str(str(pins))};
    patches = [ ];
  }};
in {what}
"""
    env = {**os.environ, "NIX_CONFIG": NIX_CONFIG + "\nallow-import-from-derivation = false"}
    cmd = ["nix-instantiate", "--eval", "--strict", "--json", "--expr", expr]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)


def value(pins: Path, what: str) -> Any:
    done = sglang(pins, what)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture()
def pins(tmp_path: Path) -> Path:
    shutil.copytree(FIXTURES / "pins-complete", tmp_path / "pins")
    return tmp_path / "pins"


def test_evaluates_without_import_from_derivation(pins: Path) -> None:
    done = sglang(pins, "builtins.deepSeq s.passthru.cargoDeps (builtins.deepSeq s.nativeBuildInputs true)")
    assert done.returncode == 0, done.stderr


def test_cargo_vendoring_uses_the_committed_locks(pins: Path) -> None:
    got = value(
        pins,
        "{ inherit (s) cargoRoot sourceRoot postPatch nativeBuildInputs; deps = s.cargoDeps; "
        "src = s.src.outPath; }",
    )
    assert got["sourceRoot"] == "source/python" and got["cargoRoot"] == "../rust"
    assert "/fake-store/cargo-setup-hook" in got["nativeBuildInputs"]
    # One vendor directory per committed lock, main workspace first (its Cargo.lock is the one
    # cargoSetupHook compares with the tree), each with only the hashes of its own git dependencies.
    deps = got["deps"]
    assert deps["kind"] == "join" and deps["name"] == "cargo-vendor-dir"
    main, ext = deps["paths"]
    committed = pins / "sglang-cargo-locks" / "rust"
    assert main["lockText"] == (committed / "Cargo.lock").read_text()
    assert main["outputHashes"] == {"tonic-0.12.3": "sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="}
    assert ext["lockText"] == (committed / "ext" / "Cargo.lock").read_text()
    assert ext["outputHashes"] == {}
    # The extension workspace's lock in the tree must be the committed one.
    assert "cmp ../rust/ext/Cargo.lock " in got["postPatch"]
    assert "rust/Cargo.lock" not in got["postPatch"].replace("rust/ext/Cargo.lock", "")


def test_absent_cargo_locks_name_the_lock_command(pins: Path) -> None:
    pin = json.loads((pins / "sglang-cargo.json").read_text())
    del pin["locks"]
    (pins / "sglang-cargo.json").write_text(json.dumps(pin))
    done = sglang(pins, "builtins.deepSeq s.cargoDeps null")
    assert done.returncode != 0
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert errors and "nix/pins/sglang-cargo.json locks" in errors[-1] and LOCK_HINT in errors[-1]


def test_locks_written_for_another_commit_are_refused(pins: Path) -> None:
    pin = json.loads((pins / "sglang-cargo.json").read_text())
    (pins / "sglang-cargo.json").write_text(json.dumps({**pin, "rev": "0" * 40}))
    done = sglang(pins, "builtins.deepSeq s.cargoDeps null")
    assert (
        done.returncode != 0 and "written for sglang 0000000000" in done.stderr and LOCK_HINT in done.stderr
    )
