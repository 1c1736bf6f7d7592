"""The lock steps: each reads what is pinned, computes what is missing (network through net.py, logic in
nar/unpack/cargo/hf) and writes its pin file. Finished pins are skipped unless forced."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pinlock import cargo, guard, hf, hub, net, recipe, snapshot, state, stubs
from pinlock.nar import nar_sha256, sri
from pinlock.pins import (
    CARGO_LOCKS,
    CARGO_PIN,
    DEFAULT_RECIPE,
    MANIFESTS,
    SERVER_ENV,
    SRC_PIN,
    STUBS_PIN,
    PinError,
    UsageError,
    read_json,
    write_json,
)
from pinlock.unpack import git_export_caveats, unpack_tarball


def say(message: str) -> None:
    print(f"pinlock: {message}", file=sys.stderr, flush=True)


@dataclass
class Context:
    root: Path
    cache: Path
    force: bool = False
    recipe_path: Path | None = None
    # Injected so that tests can serve tarballs from file:// URLs.
    tarball_url: Callable[[str, str, str], str] = net.github_tarball_url
    scratch: Path | None = None
    trees: dict[tuple[str, str, str], Path] = field(default_factory=dict)

    def recipe(self) -> recipe.RecipePins:
        """The recipe this run pins for (--recipe, else the checkout's default), every field checked."""
        return recipe.read(self.recipe_path or self.root / DEFAULT_RECIPE)

    def write(self, rel: Path, data: Any, old: str | None, new: str) -> None:
        """Write a pin of the checkout through the replace guard (pinlock.guard)."""
        guard.write(self.root, rel, data, old=old, new=new, force=self.force)


@contextmanager
def workspace(ctx: Context) -> Iterator[None]:
    """Unpacked trees live for one run in a temporary directory (they are large and cheap to redo)."""
    ctx.cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="pinlock-") as temp:
        ctx.scratch, ctx.trees = Path(temp), {}
        try:
            yield
        finally:
            ctx.scratch, ctx.trees = None, {}


def github_tree(ctx: Context, owner: str, repo: str, rev: str) -> Path:
    """The unpacked tree of owner/repo@rev (tarball cached in ctx.cache, unpacked once per run)."""
    key = (owner, repo, rev)
    if key in ctx.trees:
        return ctx.trees[key]
    if ctx.scratch is None:
        raise RuntimeError("github_tree needs a workspace(ctx)")
    archive = ctx.cache / "github" / f"{owner}--{repo}--{rev}.tar.gz"
    net.download(ctx.tarball_url(owner, repo, rev), archive, f"{owner}/{repo}@{rev[:12]}")
    tree = unpack_tarball(archive, ctx.scratch / f"{owner}--{repo}--{rev}")
    ctx.trees[key] = tree
    return tree


def tree_nar_hash(tree: Path, label: str) -> str:
    progress = net.Progress(f"hashing {label}", None)
    digest = nar_sha256(tree, progress)
    return sri(digest)


def lock_src(ctx: Context) -> None:
    """nix/pins/sglang-src.json: the narHash of the GitHub tarball at the recipe's engine rev."""
    engine = ctx.recipe().engine
    current, why = state.src(ctx.root, engine)
    if current == state.PINNED and not ctx.force:
        say(f"{SRC_PIN}: already pinned for {engine}; --force recomputes")
        return
    if why and current != state.PINNED:
        say(f"{why}: pinning {engine}")
    held = state.src_identity(ctx.root)
    old = held.identity if held is not None else None
    guard.check_replace(ctx.root, SRC_PIN, old, engine.identity, ctx.force)  # before the download
    tree = github_tree(ctx, engine.owner, engine.repo, engine.rev)
    pin = {"owner": engine.owner, "repo": engine.repo, "rev": engine.rev}
    pin["narHash"] = tree_nar_hash(tree, str(engine))
    ctx.write(SRC_PIN, pin, old, engine.identity)
    say(f"{SRC_PIN}: narHash {pin['narHash']}")


def cargo_lock_files(tree: Path, cargo_dir: str) -> list[Path]:
    """`<dir>/Cargo.lock` and `<dir>/*/Cargo.lock`, main workspace first: the lock files committed under
    nix/pins/sglang-cargo-locks/ that pkgs/sglang vendors (one importCargoLock each)."""
    base = tree / cargo_dir
    candidates = [base / "Cargo.lock"] + sorted(base.glob("*/Cargo.lock")) if base.is_dir() else []
    return [p for p in candidates if p.is_file()]


def lock_cargo(ctx: Context, cargo_dir: str = "rust", manual: dict[str, str] | None = None) -> None:
    """nix/pins/sglang-cargo.json: the Cargo.lock files of SGLang's workspaces (copied under
    nix/pins/sglang-cargo-locks/ and listed as `locks`) and the outputHashes of their git dependencies.

    Written only when complete. Hashes computed so far are kept in the cache (a rerun resumes);
    `manual` ({name-version: hash}) supplies what cannot be computed from a GitHub tarball."""
    engine = ctx.recipe().engine
    hashes_state, locks_state = state.cargo(ctx.root, engine)
    done = hashes_state[0] == locks_state[0] == state.PINNED
    if done and not ctx.force and not manual:
        say(f"{CARGO_PIN}: already pinned for {engine}; --force recomputes")
        return
    written_for = _cargo_rev(ctx.root)
    old = f"{engine.owner}/{engine.repo}@{written_for}" if written_for else None
    guard.check_replace(ctx.root, CARGO_PIN, old, engine.identity, ctx.force)  # before the download
    pin = {"owner": engine.owner, "repo": engine.repo, "rev": engine.rev}
    tree = github_tree(ctx, engine.owner, engine.repo, engine.rev)
    locks = cargo_lock_files(tree, cargo_dir)
    if not locks:
        raise PinError(f"no Cargo.lock under {cargo_dir}/ in {pin['repo']}@{pin['rev']}: pass --cargo-dir")
    deps: list[cargo.GitDependency] = []
    for lock in locks:
        deps += cargo.git_dependencies(lock.read_text(), str(lock.relative_to(tree)))
    say(f"{len(locks)} Cargo.lock file(s), {len(deps)} git dependencies")
    progress_file = ctx.cache / f"cargo-progress-{pin['rev']}.json"
    by_commit: dict[str, str] = {} if ctx.force else dict(read_json(progress_file) or {})
    for dep in deps:
        if manual and dep.key in manual:
            by_commit[dep.commit] = manual[dep.key]
    unknown = sorted(set(manual or {}) - {d.key for d in deps})
    if unknown:
        raise UsageError(
            f"--set names no git dependency of the Cargo locks: {unknown}; they have "
            f"{sorted({d.key for d in deps}) or 'none'}"
        )
    for dep in deps:
        if dep.commit in by_commit:
            continue
        by_commit[dep.commit] = _git_dep_hash(ctx, dep)
        write_json(progress_file, by_commit)
    hashes = cargo.output_hashes(deps, by_commit)
    # The lock files first, the pin that lists them last: an interrupted run leaves no pin naming
    # files that are not there.
    committed = cargo.commit_locks(tree, locks, ctx.root / CARGO_LOCKS)
    ctx.write(
        CARGO_PIN, {"rev": pin["rev"], "locks": committed, "outputHashes": hashes}, old, engine.identity
    )
    say(f"{CARGO_PIN}: {len(committed)} Cargo.lock file(s) under {CARGO_LOCKS}, {len(hashes)} output hashes")


def _cargo_rev(root: Path) -> str | None:
    """The commit the checkout's Cargo pin was written for, when it names one."""
    try:
        pin = read_json(root / CARGO_PIN)
    except PinError:
        return None
    rev = pin.get("rev") if isinstance(pin, dict) else None
    return rev if isinstance(rev, str) else None


def _git_dep_hash(ctx: Context, dep: cargo.GitDependency) -> str:
    manual_fix = (
        f"compute it with `nix-prefetch-git --url {dep.url} --rev {dep.commit} --fetch-submodules` "
        f"and pass it as `pinlock cargo --set {dep.key}=sha256-...`"
    )
    github = dep.github()
    if github is None:
        raise PinError(f"{dep.key} comes from {dep.url}, not GitHub: {manual_fix}")
    subtree = github_tree(ctx, github[0], github[1], dep.commit)
    caveats = git_export_caveats(subtree)
    if caveats:
        raise PinError(
            f"{dep.key}: the tarball of {dep.url}@{dep.commit} differs from a git checkout "
            f"({'; '.join(caveats)}): {manual_fix}"
        )
    return tree_nar_hash(subtree, f"{dep.key}@{dep.commit[:12]}")


def lock_weights(ctx: Context, repo: str, revision: str, located: snapshot.Located | None = None) -> None:
    """pkgs/weights/manifests/<org>--<name>.json for repo@revision, from the Hub or a local hub cache."""
    try:
        hf.check_revision(revision)
    except hf.ManifestError as error:
        raise UsageError(f"{repo}: {error}") from None
    rel = MANIFESTS / hf.manifest_filename(repo)
    current, detail = state.manifest(ctx.root, repo, revision)
    if current == state.PINNED and not ctx.force:
        say(f"{rel}: already pinned at {revision[:12]}; --force recomputes")
        return
    pinned = pinned_revision(ctx, repo)
    old, new = (f"{repo}@{pinned}" if pinned else None), f"{repo}@{revision}"
    guard.check_replace(ctx.root, rel, old, new, ctx.force)  # before the hashing or the download
    if current == state.MALFORMED:
        say(f"{detail}: writing it again")
    if located is not None:
        say(f"hashing and verifying every file of {located.revision.snapshot_path}")
        manifest = snapshot.manifest_from_cache(located, repo, _file_progress(), say)
    else:
        manifest = hub.manifest_from_hub(repo, revision, ctx.cache / "hub")
    ctx.write(rel, manifest, old, new)
    total = sum(f["size"] for f in manifest["files"]) / 2**30
    say(f"{rel}: {len(manifest['files'])} files, {total:.2f} GiB")


def pinned_revision(ctx: Context, repo: str) -> str | None:
    """The revision the checkout's manifest of `repo` pins, when it is a readable manifest."""
    try:
        data = read_json(ctx.root / MANIFESTS / hf.manifest_filename(repo))
    except PinError:
        return None
    revision = data.get("revision") if isinstance(data, dict) else None
    return revision if isinstance(revision, str) and data.get("repo") == repo else None


def _file_progress() -> Callable[[str, int], Callable[[int], None]]:
    """Per file: `  hashing NAME  1.2 GiB of 4.9 GiB  850 MiB/s` while it is read (redrawn on a terminal,
    a line every 10 s elsewhere), and a last line when it is done, so a long hash never looks stuck."""

    def for_file(name: str, size: int) -> Callable[[int], None]:
        bar = net.Progress(f"  hashing {name}", size)
        return lambda done: bar(done, final=done >= size)

    return for_file


def recipe_repos(ctx: Context) -> list[tuple[str, str]]:
    """(repo, revision) of the recipe's model and drafter that come from the Hub."""
    return list(ctx.recipe().weights)


def lock_uv(ctx: Context, upgrade: bool = False) -> None:
    """Refresh pkgs/server-env/uv.lock (its exclude-newer date keeps the resolution fixed)."""
    uv = shutil.which("uv")
    if uv is None:
        raise PinError("uv is not on PATH: run `nix run .#lock` (it provides uv) or install uv")
    cmd = [uv, "lock", "--project", str(ctx.root / SERVER_ENV)] + (["--upgrade"] if upgrade else [])
    say(" ".join(cmd[1:]))
    if subprocess.run(cmd).returncode != 0:
        raise PinError("uv lock failed (its message is above)")


def lock_wheel_stubs(ctx: Context, python: str = "cp312", arch: str = "x86_64") -> None:
    """nix/pins/wheel-stubs.json: for each sdist-only package of uv.lock that is a wheel stub, the URL and
    hash of the real wheel on the index the stub names (for the Nix interpreter `python`)."""
    lock = ctx.root / SERVER_ENV / "uv.lock"
    pinned, broken = state.stubs(ctx.root)
    if broken:
        say(f"{broken}: writing it again")
    out: dict[str, Any] = {}
    for package in stubs.sdist_only(lock.read_text()):
        previous = pinned.get(package.name)
        if state.stub(previous, package.version)[0] == state.PINNED and not ctx.force:
            out[package.name] = previous
            continue
        archive = ctx.cache / "sdists" / package.url.rsplit("/", 1)[-1]
        net.download(package.url, archive, package.name)
        if hf.sha256_file(archive) != package.sha256:
            archive.unlink()
            raise PinError(f"{package.url}: sha256 differs from uv.lock's; run again")
        index = stubs.stub_index(stubs.sdist_pyproject(archive))
        if index is None:
            say(f"{package.name} {package.version}: a real sdist (Nix builds it), nothing to pin")
            continue
        page_url = urllib.parse.urljoin(
            index if index.endswith("/") else index + "/", f"{stubs.normalize(package.name)}/"
        )
        wheel = stubs.select_wheel(
            stubs.parse_simple_index(net.get_text(page_url), page_url),
            package.name,
            package.version,
            python,
            arch,
        )
        digest = wheel.sha256
        if digest is None:
            path = net.download(wheel.url, ctx.cache / "wheels" / wheel.filename, wheel.filename)
            digest = hf.sha256_file(path)
        out[package.name] = {"version": package.version, "url": wheel.url, "hash": sri(bytes.fromhex(digest))}
        say(f"{package.name} {package.version}: {wheel.filename}")
    # These pins follow uv.lock, which no recipe names: the guard has no recipe's pin to keep here.
    ctx.write(STUBS_PIN, dict(sorted(out.items())), None, str(lock))


def status(ctx: Context) -> list[tuple[str, str, str]]:
    """(what, "pinned" | "ABSENT" | "MALFORMED", why) for every pin this tool writes, each checked
    against the recipe it serves (pinlock.state)."""
    pins = ctx.recipe()
    hashes, locks = state.cargo(ctx.root, pins.engine)
    rows = [
        (f"{SRC_PIN} narHash", *state.src(ctx.root, pins.engine)),
        (f"{CARGO_PIN} outputHashes", *hashes),
        (f"{CARGO_PIN} locks ({CARGO_LOCKS}/)", *locks),
    ]
    for repo, revision in pins.weights:
        rows.append((f"weights manifest {repo}@{revision[:12]}", *state.manifest(ctx.root, repo, revision)))
    lock = ctx.root / SERVER_ENV / "uv.lock"
    try:
        sdists = stubs.sdist_only(lock.read_text()) if lock.is_file() else None
    except (ValueError, OSError) as error:  # a uv.lock that cannot be read is a malformed pin
        rows.append((f"{SERVER_ENV}/uv.lock", state.MALFORMED, str(error)))
        return rows
    rows.append((f"{SERVER_ENV}/uv.lock", "pinned" if sdists is not None else "ABSENT", ""))
    if sdists is not None:
        pinned, broken = state.stubs(ctx.root)
        for package in sdists:
            row = (
                (state.MALFORMED, broken) if broken else state.stub(pinned.get(package.name), package.version)
            )
            rows.append((f"{STUBS_PIN} {package.name} (sdist only)", *row))
    return rows
