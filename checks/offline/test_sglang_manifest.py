"""exactlaunch.manifest, the content manifest of a patched SGLang tree: its diff reading against git's, its
command line, and pkgs/sglang's postInstall (evaluated with the real Nix, run with bash) on the files of
the real sglang 0.5.20 wheel."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from checkhelpers.hfcache_support import NIX_CONFIG, NIXPKGS_DOUBLES, nix_str
from checkhelpers.lock_testing import git_repo
from checkhelpers.released_wheels import unpacked_wheel
from checkhelpers.sglang_series import REPO, SERIES, apply_series, copy_touched
from exactlaunch import manifest

FIXTURE_NEEDS = {"release": ("network",)}


@pytest.fixture(scope="module")
def release() -> Path:
    return unpacked_wheel("sglang", "0.5.20")


def test_touched_files_of_a_git_diff_with_a_deletion(tmp_path: Path) -> None:
    """A diff git itself wrote (create, modify, delete under python/sglang/), read as git reads it."""
    repo = tmp_path / "sglang"
    files = {"python/sglang/keep.py": "a = 1\n", "python/sglang/gone.py": "b = 2\n"}
    git_repo(repo, files)
    (repo / "python/sglang/keep.py").write_text("a = 2\n")
    (repo / "python/sglang/gone.py").unlink()
    (repo / "python/sglang/srt").mkdir()
    (repo / "python/sglang/srt/new.py").write_text("c = 3\n")
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
    diff = subprocess.run(
        ["git", "-C", str(repo), "diff", "--cached"], capture_output=True, text=True, check=True
    ).stdout
    assert manifest.touched_files(diff, "x.patch") == {
        "sglang/gone.py": False,
        "sglang/keep.py": True,
        "sglang/srt/new.py": True,
    }
    with pytest.raises(manifest.ManifestError, match="names no files"):
        manifest.touched_files("not a diff\n", "x.patch")


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "exactlaunch.manifest", *args], capture_output=True, text=True
    )


def test_cli_writes_only_for_the_applied_series_and_verifies(tmp_path: Path, release: Path) -> None:
    copy_touched(release, tmp_path)
    apply_series(tmp_path, SERIES[:2], write_manifest=False)
    refused = _cli("write", str(tmp_path), "--series", str(REPO / "patches" / "sglang"))
    assert refused.returncode == 1 and not (tmp_path / manifest.MANIFEST).exists()
    assert "0007-exact-gdn-prefix-snapshot.patch is not applied in" in refused.stderr  # the newest first
    assert "sglang/kernels/ops/attention/fla/chunk.py" in refused.stderr
    # The two applied patches, given as files, are a series of their own.
    done = _cli("write", str(tmp_path), "--series", *map(str, SERIES[:2]))
    assert done.returncode == 0, done.stderr
    assert _cli("verify", str(tmp_path), "--expect", *(p.name for p in SERIES[:2])).returncode == 0
    stale = _cli("verify", str(tmp_path), "--expect", *(p.name for p in SERIES))
    assert stale.returncode == 1 and "(a stale tree)" in stale.stderr
    assert _cli("write", str(tmp_path / "nope"), "--series", str(SERIES[0])).returncode == 1


def _eval_rw(expr: str) -> str:
    """A string-valued Nix expression, evaluated with the real Nix in read-write mode: the paths it names
    (manifest.py, the patches) are copied into the store, as a build would have them."""
    cmd = ["nix-instantiate", "--read-write-mode", "--eval", "--strict", "--json", "--expr", expr]
    env = {**os.environ, "NIX_CONFIG": NIX_CONFIG}
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=env)
    assert done.returncode == 0, done.stderr
    value: str = json.loads(done.stdout)
    return value


def _post_install(patches_dir: Path) -> str:
    """pkgs/sglang's postInstall, evaluated over doubles for what it does not read."""
    args = (
        f"lib = d.lib; pkgs = {{ python3.interpreter = {nix_str(sys.executable)}; }}; "
        "locked = { overrideAttrs = f: f { passthru = { }; }; }; "
        "pyprojectHook = null; resolveBuildSystem = null; blib = null; pinsDir = null; "
        f"patches = (import ./nix/lib/patches.nix).series (/. + {nix_str(str(patches_dir))});"
    )
    return _eval_rw(
        f"let d = {NIXPKGS_DOUBLES}; in (import ./pkgs/sglang/default.nix {{ {args} }}).postInstall"
    )


@pytest.mark.nix
def test_nix_post_install_writes_the_manifest_of_the_installed_tree(tmp_path: Path, release: Path) -> None:
    script = _post_install(REPO / "patches" / "sglang")
    site = tmp_path / "out" / "lib" / "python3.12" / "site-packages"
    copy_touched(release, site)
    env = {**os.environ, "out": str(tmp_path / "out"), "NIX_BUILD_TOP": str(tmp_path / "build")}
    (tmp_path / "build").mkdir()
    apply_series(site, SERIES[:1], write_manifest=False)
    partial = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script], env=env, capture_output=True, text=True
    )
    assert partial.returncode != 0 and "0007-exact-gdn-prefix-snapshot.patch is not applied" in partial.stderr
    apply_series(site, SERIES[1:], write_manifest=False)
    (tmp_path / "build" / "bitexact-series").rename(tmp_path / "build" / "first-try")
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    written = json.loads((site / manifest.MANIFEST).read_text())
    assert [s["name"] for s in written["series"]] == [p.name for p in SERIES]  # names, not store paths
    assert manifest.verify(site, [p.name for p in SERIES]) == []


@pytest.mark.nix
def test_nix_patches_apply_check_runs_the_writer(tmp_path: Path, release: Path) -> None:
    """nix/cpu-checks.nix's sglang-patches-apply on a source tree laid out as SGLang's repository
    (python/sglang/...), here with the touched files of the 0.5.20 wheel standing in for the commit."""
    source = tmp_path / "source"
    copy_touched(release, source / "python")
    args = (
        "pkgs = d; lib = d.lib; "
        "deep-gemm = null; "
        f'sglangSrc = {{ outPath = /. + {nix_str(str(source))}; rev = "test"; }}; '
        f"sglangPatches = (import ./nix/lib/patches.nix).series ./patches/sglang;"
    )
    checks = f"import ./nix/cpu-checks.nix {{ {args} }}"
    script = _eval_rw(f"let d = {NIXPKGS_DOUBLES}; in ({checks}).sglang-patches-apply.script")
    build = tmp_path / "build"
    build.mkdir()
    env = {**os.environ, "out": str(tmp_path / "out")}
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script], env=env, cwd=build, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{len(SERIES)} patches apply to test" in done.stdout
    assert manifest.verify(build / "tree" / "python", [p.name for p in SERIES]) == []
