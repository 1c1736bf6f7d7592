"""pinlock's tarball path: a real `git archive` tarball unpacked by pinlock hashes to what Nix's own
fetcher unpack (`nix-prefetch-url --unpack`) and `nix hash path` of a `tar -x` extraction give."""

from __future__ import annotations

import io
import subprocess
import tarfile
from pathlib import Path

import pytest
from checkhelpers.lock_testing import git_archive, git_repo, nix, nix_unpacked_sri
from pinlock.nar import nar_hash
from pinlock.unpack import UnpackError, git_export_caveats, unpack_tarball

FILES: dict[str, str | bytes] = {
    "README.md": "hello\n",
    "python/sglang/__init__.py": "",
    "rust/Cargo.toml": "[workspace]\n",
    "rust/crate/src/lib.rs": "pub fn f() {}\n",
    "scripts/run.sh": "#!/bin/sh\nexit 0\n",
    "data/blob.bin": bytes(range(256)) * 4099,
}


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("git")
    rev = git_repo(
        base / "repo",
        FILES,
        executables=("scripts/run.sh",),
        symlinks={"python/link": "sglang/__init__.py", "dangling": "nowhere"},
    )
    return git_archive(base / "repo", rev, f"sglang-{rev}", base / f"{rev}.tar.gz")


@pytest.mark.nix
def test_unpack_then_hash_equals_nix_fetcher(archive: Path, tmp_path: Path) -> None:
    tree = unpack_tarball(archive, tmp_path / "out")
    assert tree.name.startswith("sglang-")
    assert (tree / "scripts" / "run.sh").stat().st_mode & 0o100
    assert (tree / "python" / "link").is_symlink()
    assert nar_hash(tree) == nix_unpacked_sri(archive)


@pytest.mark.nix
def test_unpack_then_hash_equals_nix_hash_path_of_tar_extraction(archive: Path, tmp_path: Path) -> None:
    (tmp_path / "tar").mkdir()
    subprocess.run(["tar", "-xzf", str(archive), "-C", str(tmp_path / "tar")], check=True)
    (extracted,) = (tmp_path / "tar").iterdir()
    ours = unpack_tarball(archive, tmp_path / "ours")
    assert nar_hash(ours) == nix("nix", "hash", "path", str(extracted))


def _tar(members: list[tuple[tarfile.TarInfo, bytes | None]], path: Path) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def _file(name: str, mode: int = 0o644) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.mode = mode
    return info


@pytest.mark.nix
def test_hard_links_become_copies(tmp_path: Path) -> None:
    link = _file("top/b")
    link.type, link.linkname = tarfile.LNKTYPE, "top/a"
    archive = _tar([(_file("top/a", 0o755), b"same"), (link, None)], tmp_path / "h.tar.gz")
    tree = unpack_tarball(archive, tmp_path / "out")
    assert (tree / "b").read_bytes() == b"same" and (tree / "b").stat().st_mode & 0o100
    assert nar_hash(tree) == nix_unpacked_sri(archive)


@pytest.mark.parametrize("name", ["/etc/passwd", "../escape", "top/../../escape"])
def test_escaping_members_are_refused(tmp_path: Path, name: str) -> None:
    archive = _tar([(_file(name), b"x")], tmp_path / "bad.tar.gz")
    with pytest.raises(UnpackError, match="escapes"):
        unpack_tarball(archive, tmp_path / "out")


def test_writing_through_a_symlink_is_refused(tmp_path: Path) -> None:
    link = _file("top/out")
    link.type, link.linkname = tarfile.SYMTYPE, str(tmp_path)
    archive = _tar([(link, None), (_file("top/out/pwned"), b"x")], tmp_path / "sym.tar.gz")
    with pytest.raises(UnpackError, match="through a symlink"):
        unpack_tarball(archive, tmp_path / "out")
    assert not (tmp_path / "pwned").exists()


def test_more_than_one_top_level_entry_is_refused(tmp_path: Path) -> None:
    archive = _tar([(_file("a/x"), b"1"), (_file("b/y"), b"2")], tmp_path / "two.tar.gz")
    with pytest.raises(UnpackError, match="one top-level directory"):
        unpack_tarball(archive, tmp_path / "out")


def test_git_export_caveats(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    assert git_export_caveats(tmp_path) == []
    (tmp_path / "sub" / ".gitattributes").write_text("docs/ export-ignore\n")
    (tmp_path / ".gitmodules").write_text('[submodule "x"]\n')
    reasons = git_export_caveats(tmp_path)
    assert any("export-ignore" in r for r in reasons) and any("submodules" in r for r in reasons)
