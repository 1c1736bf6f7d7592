"""Helpers for the weights/image tests: evaluate builtins-only Nix with the real nix-instantiate, write
real files with their real hashes into a manifest, and lay out a hub cache as the Nix plan says."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from checkhelpers.repo import REPO

LIB = REPO / "nix" / "lib"
RECIPE_PATH = REPO / "nix" / "recipes" / "qwen3.8-27b-exact.json"
NIX_CONFIG = (
    "experimental-features = nix-command flakes\nsubstituters =\nbuild-users-group =\nsandbox = false"
)


def _run(expr: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NIX_CONFIG": NIX_CONFIG}
    cmd = ["nix-instantiate", "--eval", "--strict", "--json", "--expr", expr]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO, timeout=120)


def nix_eval(expr: str) -> Any:
    """The JSON value of a Nix expression (paths resolve from the repository root)."""
    done = _run(expr)
    if done.returncode != 0:
        shown = expr if len(expr) < 400 else expr[:150] + " ... " + expr[-250:]
        raise AssertionError(f"nix-instantiate failed on {shown!r}:\n{done.stderr}")
    return json.loads(done.stdout)


def nix_error(expr: str) -> str:
    """The error text of an expression that must fail to evaluate."""
    done = _run(expr)
    assert done.returncode != 0, f"expected an evaluation error, got {done.stdout!r}"
    return done.stderr


def nix_str(value: str) -> str:
    """A Nix string literal for `value` (JSON string syntax is valid Nix once `$` is escaped)."""
    return json.dumps(value).replace("${", "\\${")


def nix_value(value: Any) -> str:
    """A Nix expression for JSON-able data (through builtins.fromJSON, so no hand-written Nix)."""
    return f"(builtins.fromJSON {nix_str(json.dumps(value))})"


def write_repo(root: Path, repo: str, revision: str, files: dict[str, bytes]) -> dict[str, Any]:
    """Write `files` under root/<org>--<name>/ and return their manifest in the contract's schema, with
    each file's real sha256 (as the lock tool writes it) and `lfs` for the big-file suffixes."""
    base = root / repo.replace("/", "--")
    entries = []
    for rel, data in sorted(files.items()):
        path = base / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        entries.append(
            {
                "path": rel,
                "size": len(data),
                "sha256": hashlib.sha256(data).hexdigest(),
                "lfs": rel.endswith(".safetensors"),
            }
        )
    return {"repo": repo, "revision": revision, "files": entries}


def write_locked(root: Path, repos: list[tuple[dict[str, Any], dict[str, bytes]]]) -> dict[str, Path]:
    """Each (recipe entry with repo and revision, its files) written with write_repo under root/files,
    its manifest under root/manifests/<org>--<name>.json as the lock tool names it."""
    files, manifests = root / "files", root / "manifests"
    manifests.mkdir()
    for entry, content in repos:
        m = write_repo(files, entry["repo"], entry["revision"], content)
        (manifests / (entry["repo"].replace("/", "--") + ".json")).write_text(json.dumps(m))
    return {"files": files, "manifests": manifests}


def materialize(layout: dict[str, Any], files: dict[str, Path], cache: Path) -> None:
    """Build the hub cache the plan describes: links to the fetched files (here: the written files,
    keyed by the spec's store name) and the text files (refs), written byte for byte."""
    for link in layout["links"]:
        target = cache / link["target"]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.symlink_to(files[link["name"]])
    for text in layout["texts"]:
        target = cache / text["target"]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text["text"])


# Test doubles for the few nixpkgs functions pkgs/weights and images/ call (nixpkgs cannot be fetched
# here). They record their arguments instead of building, so the glue's own logic (what is fetched from
# where, which file goes into which layer, the image config, the layout script) evaluates with the real
# Nix and can be asserted.
NIXPKGS_DOUBLES = """
let
  # Like a real derivation, the output path needs every attribute evaluated (so throws surface).
  fakeDrv = name: attrs: attrs // {
    inherit name;
    outPath = builtins.seq (builtins.toJSON attrs) "/fake-store/${name}";
    # As in nixpkgs, a passthru given to overrideAttrs lands on the result too.
    overrideAttrs = f: let new = f attrs; in fakeDrv name (attrs // new // (new.passthru or { }));
  };
in rec {
  lib = {
    optional = c: x: if c then [ x ] else [ ];
    optionalString = c: s: if c then s else "";
    last = xs: builtins.elemAt xs (builtins.length xs - 1);
    mapAttrsToList = f: a: map (n: f n a.${n}) (builtins.attrNames a);
    concatMapStrings = f: xs: builtins.concatStringsSep "" (map f xs);
    escapeShellArg = s: "'" + builtins.replaceStrings [ "'" ] [ "'\\\\''" ] s + "'";
    escapeShellArgs = xs: builtins.concatStringsSep " " (map lib.escapeShellArg xs);
    findFirst = pred: default: xs:
      let m = builtins.filter pred xs; in if m == [ ] then default else builtins.head m;
    nameValuePair = name: value: { inherit name value; };
    hasPrefix = p: s: builtins.substring 0 (builtins.stringLength p) s == p;
    optionalAttrs = c: a: if c then a else { };
    genAttrs = names: f: builtins.listToAttrs (map (n: { name = n; value = f n; }) names);
  };
  # The output path fetchurl's derivation would have: a flat fixed output of that name and hash (the
  # builder does not enter it), computed by the real Nix; never built here.
  fetchurl = args: args.passthru // {
    fetchurlArgs = builtins.removeAttrs args [ "passthru" ];
    outPath = (derivation {
      inherit (args) name url;
      builder = "builtin:fetchurl";
      system = "builtin";
      outputHashMode = "flat";
      outputHashAlgo = if args ? sha256 then "sha256" else "";
      outputHash = args.sha256 or args.hash;
    }).outPath;
  };
  runCommand = name: env: script: fakeDrv name (env // (env.passthru or { }) // { inherit script; });
  writeShellApplication = args: fakeDrv args.name args;
  curl = "/fake-store/curl";
  coreutils = "/fake-store/coreutils";
  gcc = "/fake-store/gcc";
  gnupatch = "/fake-store/gnupatch";
  runCommandLocal = runCommand;
  writeText = name: text: fakeDrv name { inherit text; };
  makeWrapper = fakeDrv "makeWrapper" { };
  writeShellScriptBin = name: text: fakeDrv name { inherit text; };
  python3 = {
    outPath = "/fake-store/python3";
    sitePackages = "lib/python3.13/site-packages";
  };
  python312 = {
    sitePackages = "lib/python3.12/site-packages";
    pkgs = {
      pytest = "/fake-store/pytest";
      makePythonPath = ps: builtins.concatStringsSep ":" (map (p: "${p}/lib/python3.12/site-packages") ps);
    };
  };
  # callPackage as nixpkgs does it: the function's named arguments from this set, overridden by `args`.
  callPackage = f: args:
    let fn = import f; in fn (builtins.intersectAttrs (builtins.functionArgs fn) doubles // args);
  doubles = { inherit lib fetchurl runCommand runCommandLocal writeText writeShellApplication
    writeShellScriptBin makeWrapper curl coreutils gcc gnupatch python3 python312; };
  nix2container = {
    buildLayer = args: args // { kind = "layer"; };
    buildImage = args: args // { kind = "image"; };
  };
}
"""

# The builders pkgs/weights/default.nix takes, from the doubles bound to `d`.
WEIGHTS_BUILDERS = "inherit (d) lib fetchurl runCommandLocal writeText writeShellApplication;"


def shellcheck_as_nixpkgs(text: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    """shellcheck a writeShellApplication `text` the way nixpkgs' check phase does: with the preamble
    it prepends (bash, errexit, nounset, pipefail) and shellcheck's default severity."""
    script = tmp / "script.sh"
    script.write_text("#!/usr/bin/env bash\nset -o errexit\nset -o nounset\nset -o pipefail\n\n" + text)
    shellcheck = Path(sys.executable).parent / "shellcheck"
    return subprocess.run([str(shellcheck), str(script)], capture_output=True, text=True)
