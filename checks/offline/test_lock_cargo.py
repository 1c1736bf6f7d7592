"""pinlock's Cargo path: git dependencies of Cargo.lock files -> importCargoLock outputHashes, end to end
from file:// tarballs, each hash checked against Nix's own unpack of the same `git archive`; and the lock
files themselves, committed under nix/pins/sglang-cargo-locks/ for the flake to evaluate from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from checkhelpers.lock_testing import git_archive, git_repo, nix_unpacked_sri
from pinlock import commands
from pinlock.cargo import GitDependency, committed_locks_present, git_dependencies, output_hashes
from pinlock.pins import CARGO_LOCKS, CARGO_PIN, PinError

REPO = Path(__file__).resolve().parents[2]

SHA_A = "0123456789abcdef0123456789abcdef01234567"
SHA_B = "89abcdef0123456789abcdef0123456789abcdef"
LOCK_V3 = f"""
version = 3

[[package]]
name = "sglang-router"
version = "0.1.0"

[[package]]
name = "serde"
version = "1.0.0"
source = "registry+https://github.com/rust-lang/crates.io-index"
checksum = "{"0" * 64}"

[[package]]
name = "widget"
version = "0.3.1"
source = "git+https://github.com/acme/widget?rev=v0.3.1#{SHA_A}"

[[package]]
name = "widget-macros"
version = "0.3.1"
source = "git+https://github.com/acme/widget?rev=v0.3.1#{SHA_A}"

[[package]]
name = "gizmo"
version = "2.0.0"
source = "git+https://gitlab.example.org/g/gizmo.git?branch=main#{SHA_B}"
"""


def test_git_dependencies_of_a_lock() -> None:
    deps = git_dependencies(LOCK_V3)
    assert [d.key for d in deps] == ["widget-0.3.1", "widget-macros-0.3.1", "gizmo-2.0.0"]
    assert deps[0] == GitDependency("widget", "0.3.1", "https://github.com/acme/widget", SHA_A)
    assert deps[0].github() == ("acme", "widget")
    assert deps[2].github() is None and deps[2].url == "https://gitlab.example.org/g/gizmo.git"


def test_lock_v4_encoded_query_and_plain_commit() -> None:
    text = f"""version = 4
[[package]]
name = "a"
version = "1.0.0"
source = "git+https://github.com/o/a.git?branch=feature%2Fx#{SHA_A}"
[[package]]
name = "b"
version = "1.0.0"
source = "git+https://github.com/o/b#{SHA_B}"
"""
    deps = git_dependencies(text)
    assert [(d.github(), d.commit) for d in deps] == [(("o", "a"), SHA_A), (("o", "b"), SHA_B)]


def test_bad_lock_files_are_named() -> None:
    with pytest.raises(ValueError, match="rust/Cargo.lock: not valid TOML"):
        git_dependencies("[[package]\n", "rust/Cargo.lock")
    bad = '[[package]]\nname = "x"\nversion = "1"\nsource = "git+https://github.com/o/x?rev=1"\n'
    with pytest.raises(ValueError, match="cannot parse git source"):
        git_dependencies(bad)


def test_output_hashes_one_per_key_and_conflicts() -> None:
    deps = git_dependencies(LOCK_V3)
    hashes = output_hashes(deps, {SHA_A: "sha256-A", SHA_B: "sha256-B"})
    assert hashes == {
        "gizmo-2.0.0": "sha256-B",
        "widget-0.3.1": "sha256-A",
        "widget-macros-0.3.1": "sha256-A",
    }
    with pytest.raises(KeyError, match="gizmo"):
        output_hashes(deps, {SHA_A: "sha256-A"})
    clash = [GitDependency("w", "1", "u", SHA_A), GitDependency("w", "1", "u", SHA_B)]
    with pytest.raises(ValueError, match="two different commits"):
        output_hashes(clash, {SHA_A: "x", SHA_B: "y"})


def test_lock_file_discovery(tmp_path: Path) -> None:
    for rel in (
        "rust/Cargo.lock",
        "rust/ext/Cargo.lock",
        "rust/ext/deep/Cargo.lock",
        "rust/target/Cargo.lock",
    ):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("version = 3\n")
    assert [p.relative_to(tmp_path).as_posix() for p in commands.cargo_lock_files(tmp_path, "rust")] == [
        "rust/Cargo.lock",
        "rust/ext/Cargo.lock",
        "rust/target/Cargo.lock",
    ]


# End to end: a fake SGLang repo whose rust/ lock files name git dependencies on two other repos.


@pytest.fixture
def world(tmp_path: Path) -> dict[str, object]:
    archives: dict[tuple[str, str, str], Path] = {}
    widget_rev = git_repo(
        tmp_path / "widget",
        {"Cargo.toml": '[package]\nname = "widget"\n', "src/lib.rs": "//! w\n", "build.sh": "#!/bin/sh\n"},
        executables=("build.sh",),
    )
    gadget_rev = git_repo(tmp_path / "gadget", {"Cargo.toml": '[package]\nname = "gadget"\n'})
    lock = f"""version = 3
[[package]]
name = "widget"
version = "0.3.1"
source = "git+https://github.com/acme/widget?rev=v0.3.1#{widget_rev}"
[[package]]
name = "widget-macros"
version = "0.3.1"
source = "git+https://github.com/acme/widget?rev=v0.3.1#{widget_rev}"
"""
    ext_lock = f"""version = 4
[[package]]
name = "gadget"
version = "0.9.0"
source = "git+https://github.com/acme/gadget.git?branch=main#{gadget_rev}"
"""
    sglang_rev = git_repo(tmp_path / "sglang", {"rust/Cargo.lock": lock, "rust/ext/Cargo.lock": ext_lock})
    locks = {"rust/Cargo.lock": lock, "rust/ext/Cargo.lock": ext_lock}
    for repo, rev in (("widget", widget_rev), ("gadget", gadget_rev), ("sglang", sglang_rev)):
        owner = "sgl-project" if repo == "sglang" else "acme"
        archives[(owner, repo, rev)] = git_archive(
            tmp_path / repo, rev, f"{repo}-{rev}", tmp_path / f"{repo}-{rev}.tar.gz"
        )
    root = tmp_path / "checkout"
    (root / "nix" / "recipes").mkdir(parents=True)
    # The pins serve the recipe: its engine at the commit of this stand-in SGLang repository.
    recipe = json.loads((REPO / "nix" / "recipes" / "qwen3.8-27b-exact.json").read_text())
    recipe["engine"]["rev"] = sglang_rev
    (root / "nix" / "recipes" / "qwen3.8-27b-exact.json").write_text(json.dumps(recipe))
    ctx = commands.Context(
        root=root,
        cache=tmp_path / "cache",
        tarball_url=lambda owner, repo, rev: archives[(owner, repo, rev)].as_uri(),
    )
    return {
        "ctx": ctx,
        "archives": archives,
        "widget": widget_rev,
        "gadget": gadget_rev,
        "sglang": sglang_rev,
        "locks": locks,
    }


@pytest.mark.nix
def test_lock_src_and_cargo_end_to_end(world: dict[str, object]) -> None:
    ctx = world["ctx"]
    archives = world["archives"]
    assert isinstance(ctx, commands.Context) and isinstance(archives, dict)
    with commands.workspace(ctx):
        commands.lock_src(ctx)
        commands.lock_cargo(ctx)
    src = json.loads((ctx.root / "nix/pins/sglang-src.json").read_text())
    assert src["narHash"] == nix_unpacked_sri(archives[("sgl-project", "sglang", world["sglang"])])
    pin = json.loads((ctx.root / CARGO_PIN).read_text())
    widget = nix_unpacked_sri(archives[("acme", "widget", world["widget"])])
    gadget = nix_unpacked_sri(archives[("acme", "gadget", world["gadget"])])
    assert pin == {
        "rev": world["sglang"],
        "locks": ["rust/Cargo.lock", "rust/ext/Cargo.lock"],
        "outputHashes": {"gadget-0.9.0": gadget, "widget-0.3.1": widget, "widget-macros-0.3.1": widget},
    }
    # The lock files themselves, byte for byte, where the pin says (the flake reads them from there).
    locks = world["locks"]
    assert isinstance(locks, dict)
    for rel, text in locks.items():
        assert (ctx.root / CARGO_LOCKS / rel).read_text() == text
    assert sorted(
        p.relative_to(ctx.root / CARGO_LOCKS).as_posix() for p in (ctx.root / CARGO_LOCKS).rglob("*.lock")
    ) == sorted(locks)


def test_cargo_rewrites_locks_of_an_earlier_run_and_reruns_when_one_is_missing(
    world: dict[str, object],
) -> None:
    ctx = world["ctx"]
    assert isinstance(ctx, commands.Context)
    stale = ctx.root / CARGO_LOCKS / "rust" / "gone" / "Cargo.lock"
    stale.parent.mkdir(parents=True)
    stale.write_text("version = 3\n")
    with commands.workspace(ctx):
        commands.lock_cargo(ctx)
    assert not stale.exists()  # a workspace the source no longer has leaves no lock behind
    # A pin whose lock file was deleted is not "already pinned": the next run writes it again.
    (ctx.root / CARGO_LOCKS / "rust" / "ext" / "Cargo.lock").unlink()
    with commands.workspace(ctx):
        commands.lock_cargo(ctx)
    assert (ctx.root / CARGO_LOCKS / "rust" / "ext" / "Cargo.lock").is_file()
    pin = json.loads((ctx.root / CARGO_PIN).read_text())
    assert committed_locks_present(pin, ctx.root / CARGO_LOCKS)
    assert not committed_locks_present({**pin, "locks": ["rust/none/Cargo.lock"]}, ctx.root / CARGO_LOCKS)
    assert not committed_locks_present({"rev": pin["rev"]}, ctx.root / CARGO_LOCKS)


def test_cargo_resumes_from_cache_and_skips_when_pinned(world: dict[str, object]) -> None:
    ctx = world["ctx"]
    archives = world["archives"]
    assert isinstance(ctx, commands.Context) and isinstance(archives, dict)
    with commands.workspace(ctx):
        commands.lock_cargo(ctx)
    first = (ctx.root / CARGO_PIN).read_text()
    # A second run neither downloads nor rewrites: remove the dependency tarballs to prove it.
    for key, path in archives.items():
        if key[1] != "sglang":
            path.unlink()
    for cached in (ctx.cache / "github").glob("acme--*"):
        cached.unlink()
    (ctx.root / CARGO_PIN).unlink()
    with commands.workspace(ctx):
        commands.lock_cargo(ctx)  # hashes come from the progress file in the cache
        commands.lock_cargo(ctx)  # already pinned for this rev: nothing to do
    assert (ctx.root / CARGO_PIN).read_text() == first


def test_cargo_refuses_tarballs_that_differ_from_a_checkout(world: dict[str, object], tmp_path: Path) -> None:
    ctx = world["ctx"]
    archives = world["archives"]
    assert isinstance(ctx, commands.Context) and isinstance(archives, dict)
    rev = git_repo(tmp_path / "subby", {"Cargo.toml": "", ".gitmodules": '[submodule "x"]\n'})
    archives[("acme", "gadget", world["gadget"])] = git_archive(
        tmp_path / "subby", rev, "s", tmp_path / "s.tar.gz"
    )
    with (
        commands.workspace(ctx),
        pytest.raises(PinError, match=r"gadget-0.9.0: .*submodules.*--set gadget-0.9.0="),
    ):
        commands.lock_cargo(ctx)
    assert not (ctx.root / CARGO_PIN).exists()
    with commands.workspace(ctx):
        commands.lock_cargo(ctx, manual={"gadget-0.9.0": "sha256-" + "A" * 43 + "="})
    assert json.loads((ctx.root / CARGO_PIN).read_text())["outputHashes"]["gadget-0.9.0"].startswith(
        "sha256-AAA"
    )
    with commands.workspace(ctx), pytest.raises(PinError, match="names no git dependency"):
        commands.lock_cargo(ctx, manual={"nope-1.0": "sha256-x"})
