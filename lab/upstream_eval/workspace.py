"""The scratch directory an upstream evaluation runs in: the flake at one commit, its inputs exported from
local snapshots, the stand-in nixpkgs over nixpkgs' real lib, and an evaluation-only pin set.

The pin set is complete so that every output evaluates for real instead of as a `*-needs-pins` stand-in,
and it is fake: each hash is computed from placeholder content written here (a dummy SGLang tree, dummy
Cargo and weight files), so nothing it names can be fetched or built. It lives in the scratch copy only,
never under the repository's nix/pins/.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import shutil
import subprocess
import tarfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
STANDIN = HERE / "standin-nixpkgs"

# Flake input -> the snapshot directory the `fetch` tool names it (owner+repo).
MIRRORS = {
    "uv2nix": "pyproject-nix+uv2nix",
    "pyproject-nix": "pyproject-nix+pyproject.nix",
    "pyproject-build-systems": "pyproject-nix+build-system-pkgs",
    "nix2container": "nlewo+nix2container",
}
NIXPKGS_LIB_MIRROR = "nix-community+nixpkgs.lib"

NOTICE = (
    "EVALUATION-ONLY pins written by lab/upstream_eval for one run: every hash below is computed from\n"
    "placeholder content made in this scratch directory. Nothing here can be fetched or built; it only\n"
    "lets every flake output evaluate as it would with real pins. Never copy these into nix/pins/.\n"
)


@dataclass
class Source:
    """Where one input's tree came from: the snapshot, the revision exported, and whether that is the
    revision flake.lock locks (else the snapshot's newest commit, which is said in the report)."""

    name: str
    path: Path
    origin: str
    rev: str
    locked_rev: str | None

    @property
    def exact(self) -> bool:
        return self.locked_rev is not None and self.rev == self.locked_rev

    def describe(self) -> str:
        if self.locked_rev is None:
            return f"{self.name}: {self.origin}@{self.rev[:12]} (not locked by flake.lock)"
        if self.exact:
            return f"{self.name}: {self.origin}@{self.rev[:12]} (the locked revision)"
        return (
            f"{self.name}: {self.origin}@{self.rev[:12]} (snapshot's newest commit; the locked "
            f"{self.locked_rev[:12]} is not in the snapshot)"
        )


def git(gitdir: Path, *args: str, capture: bool = True) -> str:
    done = subprocess.run(
        ["git", f"--git-dir={gitdir}", *args], capture_output=capture, text=capture, check=True
    )
    return done.stdout.strip() if capture else ""


def has_commit(gitdir: Path, rev: str) -> bool:
    done = subprocess.run(
        ["git", f"--git-dir={gitdir}", "cat-file", "-t", rev], capture_output=True, text=True
    )
    return done.returncode == 0 and done.stdout.strip() == "commit"


def git_dir(path: Path) -> Path | None:
    """The git directory of a snapshot (`fetch` gives <mirror>/repo, a bare repository) or checkout."""
    for candidate in (path / "repo", path / ".git", path):
        if (candidate / "HEAD").is_file() and (candidate / "objects").is_dir():
            return candidate
    return None


def export(gitdir: Path, rev: str, dest: Path) -> None:
    """`git archive rev` unpacked at dest (what a GitHub tarball of that commit holds)."""
    dest.mkdir(parents=True)
    archive = subprocess.run(
        ["git", f"--git-dir={gitdir}", "archive", "--format=tar", rev], capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(dest, filter="tar")


def input_source(name: str, given: Path, locked_rev: str | None, dest: Path) -> Source:
    """Export snapshot `given` (a git dir, a `fetch` mirror or a plain directory) into dest."""
    gitdir = git_dir(given)
    if gitdir is None:
        shutil.copytree(given, dest, symlinks=True)
        return Source(name, dest, str(given), "(plain directory)", locked_rev)
    rev = locked_rev if locked_rev and has_commit(gitdir, locked_rev) else git(gitdir, "rev-parse", "HEAD")
    export(gitdir, rev, dest)
    return Source(name, dest, str(given), rev, locked_rev)


def locked_revs(flake_dir: Path) -> dict[str, str]:
    """Root input name -> locked rev, from the flake.lock of the tree under evaluation."""
    lock = json.loads((flake_dir / "flake.lock").read_text())
    nodes = lock["nodes"]
    return {name: nodes[node]["locked"]["rev"] for name, node in nodes["root"]["inputs"].items()}


def export_flake(repo: Path, rev: str, dest: Path) -> str:
    """The flake at `rev` of `repo` (a checkout); returns the full commit id."""
    gitdir = Path(
        subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "--git-common-dir"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    gitdir = gitdir if gitdir.is_absolute() else (repo / gitdir).resolve()
    # Resolved in the checkout itself: in a worktree, HEAD is the worktree's, not the common dir's.
    commit = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", f"{rev}^{{commit}}"], capture_output=True, text=True, check=True
    ).stdout.strip()
    export(gitdir, commit, dest)
    return commit


def copy_worktree(repo: Path, dest: Path) -> str:
    """The checkout's working tree as git sees it (tracked and untracked, ignored files left out), for
    trying changes before they are committed; returns HEAD's commit id plus a note."""
    listed = subprocess.run(
        ["git", "-C", str(repo), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for name in filter(None, listed):
        source = repo / name.decode()
        if source.is_file() or source.is_symlink():
            target = dest / name.decode()
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target, follow_symlinks=False)
    head = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    )
    return f"{head.stdout.strip()} plus uncommitted changes (working tree)"


def standin_nixpkgs(lib_source: Source, dest: Path) -> Path:
    """The stand-in nixpkgs flake: this directory's files plus nixpkgs' real lib/ from the snapshot."""
    shutil.copytree(STANDIN, dest)
    shutil.copytree(lib_source.path / "lib", dest / "lib")
    return dest


# --- the evaluation-only pin set -------------------------------------------------------------------


def nix_hash_path(nix: list[str], path: Path) -> str:
    done = subprocess.run([*nix, "hash", "path", str(path)], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def sri_sha256(data: bytes) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(data).digest()).decode()


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def cargo_locks(git_rev: str) -> dict[str, str]:
    """A main workspace and one extension workspace, as SGLang's rust/ has (crates.io and git sources)."""
    serde = hashlib.sha256(b"eval-only crate serde 1.0.0").hexdigest()
    tch = hashlib.sha256(b"eval-only crate tch 0.0.0").hexdigest()
    registry = "registry+https://github.com/rust-lang/crates.io-index"
    git_source = f"git+https://github.com/eval-only/tonic?rev={git_rev}#{git_rev}"
    main = (
        "# EVALUATION ONLY (lab/upstream_eval)\nversion = 4\n\n"
        '[[package]]\nname = "sglang-grpc"\nversion = "0.0.0"\ndependencies = ["serde", "tonic"]\n\n'
        f'[[package]]\nname = "serde"\nversion = "1.0.0"\nsource = "{registry}"\nchecksum = "{serde}"\n\n'
        f'[[package]]\nname = "tonic"\nversion = "0.0.0"\nsource = "{git_source}"\n'
    )
    extension = (
        "# EVALUATION ONLY (lab/upstream_eval)\nversion = 4\n\n"
        '[[package]]\nname = "mem_cache"\nversion = "0.0.0"\ndependencies = ["serde", "tch"]\n\n'
        f'[[package]]\nname = "serde"\nversion = "1.0.0"\nsource = "{registry}"\nchecksum = "{serde}"\n\n'
        f'[[package]]\nname = "tch"\nversion = "0.0.0"\nsource = "{registry}"\nchecksum = "{tch}"\n'
    )
    return {"rust/Cargo.lock": main, "rust/mem-cache/Cargo.lock": extension}


def write_eval_pins(nix: list[str], flake: Path, scratch: Path) -> dict[str, str]:
    """Fill `flake`'s nix/pins and weights manifests with the evaluation-only set; add the dummy SGLang
    tree to the store (so that a tree which still reads the source at evaluation time finds it valid
    without building anything). Returns what was pinned, for the report."""
    recipe = json.loads((flake / "nix" / "recipes" / "qwen3.8-27b-exact.json").read_text())
    owner, repo = recipe["engine"]["repo"].split("/")
    rev = recipe["engine"]["rev"]
    pins = flake / "nix" / "pins"
    write(pins / "EVALUATION-ONLY.txt", NOTICE)

    # The Cargo git dependency: a placeholder tree whose NAR hash is the output hash.
    tonic = scratch / "eval-only-tonic"
    write(tonic / "Cargo.toml", '[package]\nname = "tonic"\nversion = "0.0.0"\n')
    git_rev = hashlib.sha1(b"eval-only tonic").hexdigest()
    locks = cargo_locks(git_rev)

    # The SGLang source: a placeholder tree named `source` (fetchFromGitHub's name) with the locks.
    source = scratch / "sglang" / "source"
    write(source / "EVALUATION-ONLY.txt", NOTICE)
    write(source / "python" / "pyproject.toml", '[project]\nname = "sglang"\nversion = "0.0.0"\n')
    for rel, text in locks.items():
        write(source / rel, text)
    nar_hash = nix_hash_path(nix, source)
    subprocess.run(
        [*nix, "store", "add-path", "--name", "source", str(source)], check=True, capture_output=True
    )

    write(
        pins / "sglang-src.json", json.dumps({"owner": owner, "repo": repo, "rev": rev, "narHash": nar_hash})
    )
    write(
        pins / "sglang-cargo.json",
        json.dumps(
            {"rev": rev, "locks": list(locks), "outputHashes": {"tonic-0.0.0": nix_hash_path(nix, tonic)}}
        ),
    )
    for rel, text in locks.items():
        write(pins / "sglang-cargo-locks" / rel, text)

    lock = tomllib.loads((flake / "pkgs" / "server-env" / "uv.lock").read_text())
    stub_version = next(p["version"] for p in lock["package"] if p["name"] == "cuda-tile")
    wheel = f"cuda_tile-{stub_version}-py3-none-manylinux_2_28_x86_64.whl"
    write(
        pins / "wheel-stubs.json",
        json.dumps(
            {
                "cuda-tile": {
                    "version": stub_version,
                    "url": f"https://eval-only.invalid/{wheel}",
                    "hash": sri_sha256(b"eval-only " + wheel.encode()),
                }
            }
        ),
    )

    manifests = flake / "pkgs" / "weights" / "manifests"
    for key in ("model", "drafter"):
        entry = recipe[key]
        files = []
        for path, lfs in (("config.json", False), ("model.safetensors", True)):
            data = f"eval-only {entry['repo']} {path}".encode()
            files.append(
                {"path": path, "size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "lfs": lfs}
            )
        manifest = {"repo": entry["repo"], "revision": entry["revision"], "files": files}
        write(manifests / (entry["repo"].replace("/", "--") + ".json"), json.dumps(manifest, indent=1))
    return {"sglang narHash": nar_hash, "cuda-tile": wheel}
