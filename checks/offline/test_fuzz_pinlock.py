"""Property-based tests of pinlock (`nix run .#lock`): Hypothesis draws the pin files of a checkout (the
source pin, the Cargo pin, the weights manifests, the wheel-stub pins, uv.lock), the recipe (fields
dropped, retyped, given twice) and command lines of the offline subcommands, and runs the real CLI
in-process against real files and real hub caches written as huggingface_hub lays them out.

Invariants, for every draw:
- the exit code is 0, 1 or 2 (docs/lock.md), and nothing leaves as a traceback or the crash guard's
  "internal error";
- `status` changes no file, exits 0 exactly when every row is pinned, and says "pinned" for the source
  pin only when it is the recipe's (same owner/repo, same rev) with a hash of the form Nix accepts, and for
  a manifest only when it is of the recipe's repo and revision;
- no pin a checkout recipe names changes without --force: whichever recipe `--recipe` names, a manifest
  of a revision a checkout recipe names is replaced by another revision only with --force.

The network is never reached: HF_HUB_OFFLINE=1, and pinlock's download and Hub listing functions are
replaced by ones that fail as an unreachable network does (the commands drawn are the offline ones).
Settings: fuzz_settings.py (CI: seeded and bounded; BITEXACT_FUZZ_PROFILE=long by hand).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import hypothesis
import pytest
from checkhelpers.cli_capture import run_main
from checkhelpers.fuzz_settings import fuzz
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context
from pinlock import cli, commands, hub, net

REPO = Path(__file__).resolve().parents[2]
RECIPE = json.loads((REPO / "nix" / "recipes" / "qwen3.8-27b-exact.json").read_text())
ENGINE = RECIPE["engine"]
MODEL, DRAFTER = RECIPE["model"], RECIPE["drafter"]
OTHER, THIRD = "b" * 40, "c" * 40
SRI = re.compile(r"sha256-[A-Za-z0-9+/]{43}=")  # nix/lib/pins.nix's isSriSha256
GOOD_HASH = "sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="
STUB_LOCK = """version = 1
[[package]]
name = "cuda-tile"
version = "1.0.0"
sdist = { url = "https://files.example/cuda_tile-1.0.0.tar.gz", hash = "sha256:%s" }
""" % ("0" * 64)

EDGES = [
    "", "sha256-", GOOD_HASH, GOOD_HASH.upper(), GOOD_HASH[:-1], "sha256:" + "0" * 64, ENGINE["rev"],
    ENGINE["rev"].upper(), ENGINE["rev"][:12], "sgl-project", "sglang", "main", "1" * 40, "../x",
    "rust/Cargo.lock", "../../etc/passwd", "/abs/Cargo.lock", MODEL["repo"], MODEL["revision"], OTHER,
    ENGINE["rev"] + "0", ENGINE["rev"] + " ", ENGINE["rev"][:39] + "0", "SGL-Project",
]  # fmt: skip
text = st.one_of(st.sampled_from(EDGES), st.text(max_size=8))
arg = text.filter(lambda t: "\0" not in t)  # a command line cannot carry NUL (execve ends the string)
scalar = st.one_of(st.none(), st.booleans(), st.integers(-2, 5), st.floats(allow_nan=False), text)
json_value = st.recursive(
    scalar,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(text, inner, max_size=3)),
    max_leaves=5,
)


def sometimes(chance: int) -> st.SearchStrategy[bool]:
    return st.integers(1, chance).map(lambda n: n == 1)


def event(what: str) -> None:
    if currently_in_test_context():
        hypothesis.event(what)


@st.composite
def src_pins(draw: st.DrawFn) -> Any:
    owner, repo = ENGINE["repo"].split("/")
    pin = {"owner": owner, "repo": repo, "rev": ENGINE["rev"], "narHash": GOOD_HASH}
    for key in draw(st.lists(st.sampled_from(sorted(pin) + ["extra"]), max_size=2, unique=True)):
        if draw(st.booleans()):
            pin.pop(key, None)
        else:
            pin[key] = draw(json_value)
    return pin if draw(st.integers(0, 9)) else draw(json_value)


@st.composite
def cargo_pins(draw: st.DrawFn) -> Any:
    pin: dict[str, Any] = {"rev": ENGINE["rev"], "locks": ["rust/Cargo.lock"], "outputHashes": {}}
    if draw(st.booleans()):
        pin["outputHashes"] = draw(st.dictionaries(text, st.one_of(st.just(GOOD_HASH), text), max_size=2))
    for key in draw(st.lists(st.sampled_from(sorted(pin) + ["extra"]), max_size=2, unique=True)):
        pin[key] = draw(st.one_of(json_value, st.lists(text, max_size=2)))
    return pin if draw(st.integers(0, 9)) else draw(json_value)


@st.composite
def manifests(draw: st.DrawFn, repo: str, revision: str) -> Any:
    sha = hashlib.sha256(b"{}").hexdigest()
    data: dict[str, Any] = {
        "repo": repo,
        "revision": draw(st.sampled_from([revision, revision, OTHER, revision.upper()])),
        "files": [{"path": "config.json", "size": 2, "sha256": sha, "lfs": False}],
    }
    if draw(sometimes(3)):
        data[draw(st.sampled_from(["repo", "revision", "files", "extra"]))] = draw(json_value)
    return data


@st.composite
def recipe_texts(draw: st.DrawFn) -> str:
    """The real recipe, now and then with an engine, model or drafter field dropped, retyped or moved,
    or a key given twice."""
    data = json.loads(json.dumps(RECIPE))
    if draw(sometimes(3)):
        section = draw(st.sampled_from(["engine", "model", "drafter", "schema"]))
        if section == "schema" or draw(sometimes(4)):
            data[section] = draw(json_value)
        else:
            key = draw(st.sampled_from(["repo", "rev", "revision", "path", "generator"]))
            if draw(st.booleans()):
                data[section].pop(key, None)
            else:
                data[section][key] = draw(json_value)
    rendered = json.dumps(data, indent=1)
    if draw(sometimes(6)):
        rendered = rendered.replace('"engine": {', f'"engine": {{"rev": {json.dumps(OTHER)}, ', 1)
    return rendered


@st.composite
def checkouts(draw: st.DrawFn) -> dict[str, Any]:
    """{path under the checkout: content (JSON value, or text for raw files)}; None leaves it out."""
    files: dict[str, Any] = {"nix/recipes/qwen3.8-27b-exact.json": draw(recipe_texts())}
    if draw(st.integers(0, 3)):
        files["nix/pins/sglang-src.json"] = draw(src_pins())
    if draw(st.booleans()):
        files["nix/pins/sglang-cargo.json"] = draw(cargo_pins())
        if draw(st.booleans()):
            files["nix/pins/sglang-cargo-locks/rust/Cargo.lock"] = "version = 4\n"
    for entry in (MODEL, DRAFTER):
        if draw(st.booleans()):
            name = entry["repo"].replace("/", "--")
            files[f"pkgs/weights/manifests/{name}.json"] = draw(manifests(entry["repo"], entry["revision"]))
    if draw(st.booleans()):
        files["pkgs/server-env/uv.lock"] = draw(
            st.sampled_from([STUB_LOCK, "", "[[package]]\nname = 1\n", STUB_LOCK.replace("hash", "hush")])
        )
        if draw(st.booleans()):
            stub = {"version": "1.0.0", "url": "https://files.example/w.whl", "hash": GOOD_HASH}
            files["nix/pins/wheel-stubs.json"] = draw(
                st.one_of(st.just({"cuda-tile": stub}), st.dictionaries(text, json_value, max_size=2))
            )
    return files


def lay_out(root: Path, files: dict[str, Any]) -> None:
    if root.exists():
        shutil.rmtree(root)
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content if isinstance(content, str) else json.dumps(content))


def snapshot_of(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@contextlib.contextmanager
def offline(home: Path) -> Iterator[None]:
    def unreachable(*_: Any, **__: Any) -> Any:
        raise net.NetError("the fuzzer's machine has no network")

    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update(HF_HUB_OFFLINE="1", XDG_CACHE_HOME=str(home / "cache"))
    with (
        mock.patch.dict(os.environ, env, clear=True),
        mock.patch.object(net, "download", unreachable),
        mock.patch.object(hub, "manifest_from_hub", unreachable),
        mock.patch.object(hub, "listing_once", lambda *_: (None, "the fuzzer is offline")),
        mock.patch.object(commands, "lock_uv", unreachable),
    ):
        yield


def run(args: list[str]) -> tuple[int, str, str]:
    return run_main(cli.main, args)


def assert_no_crash(code: int, out: str, err: str) -> None:
    assert code in (0, 1, 2), (code, err)
    assert "Traceback" not in out + err and "internal error" not in err, err


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fuzz-pinlock")
    (root / "dl").symlink_to(root / "nowhere" / "x")  # a --cache-dir that leads nowhere
    return root


def expected_src_pinned(files: dict[str, Any]) -> bool:
    """The oracle, written apart from pinlock.state: the recipe's engine, a hash of Nix's form."""
    pin = files.get("nix/pins/sglang-src.json")
    if not isinstance(pin, dict) or set(pin) - {"owner", "repo", "rev", "narHash"}:
        return False
    same = f"{pin.get('owner')}/{pin.get('repo')}" == ENGINE["repo"] and pin.get("rev") == ENGINE["rev"]
    return same and isinstance(pin.get("narHash"), str) and SRI.fullmatch(pin["narHash"]) is not None


@fuzz(examples=400)
@given(checkouts())
def test_status_reads_pins_against_the_recipe_and_changes_nothing(home: Path, files: dict[str, Any]) -> None:
    root = home / "checkout"
    lay_out(root, files)
    before = snapshot_of(root)
    with offline(home):
        code, out, err = run(["--root", str(root), "status"])
    assert_no_crash(code, out, err)
    assert snapshot_of(root) == before, "status changed a file"
    if code == 2:
        event("recipe refused")
        assert "recipe" in err, err
        return
    lines = out.splitlines()
    assert all(re.fullmatch(r"(pinned|ABSENT|MALFORMED)  [^\n]+", line) for line in lines), (
        out
    )  # a row a line
    rows = {line.split("  ", 1)[1].split(":", 1)[0]: line.split("  ", 1)[0] for line in lines}
    assert (code == 0) == all(state == "pinned" for state in rows.values()), out
    src = rows["nix/pins/sglang-src.json narHash"]
    event(f"source pin {src}")
    assert (src == "pinned") == expected_src_pinned(files), (files.get("nix/pins/sglang-src.json"), out)
    # A pin told apart from the recipe's is shown apart: never "pins X, the recipe's engine is X".
    for held, wanted in re.findall(r"pins (.+), the recipe's engine is (\S+):", out):
        assert held != wanted, out
    for entry in (MODEL, DRAFTER):
        state = rows[f"weights manifest {entry['repo']}@{entry['revision'][:12]}"]
        manifest = files.get(f"pkgs/weights/manifests/{entry['repo'].replace('/', '--')}.json")
        if state == "pinned":
            assert manifest["repo"] == entry["repo"] and manifest["revision"] == entry["revision"]


def hub_cache(root: Path, repo: str, revisions: list[str], files: dict[str, bytes]) -> Path:
    """A hub cache as huggingface_hub lays one out: blobs named by git blob id, snapshots linking them."""
    folder = root / ("models--" + repo.replace("/", "--"))
    (folder / "blobs").mkdir(parents=True, exist_ok=True)
    (folder / "refs").mkdir(exist_ok=True)
    for revision in revisions:
        snap = folder / "snapshots" / revision
        snap.mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
            (folder / "blobs" / blob).write_bytes(data)
            (snap / name).parent.mkdir(parents=True, exist_ok=True)
            if not (snap / name).is_symlink():
                (snap / name).symlink_to(os.path.relpath(folder / "blobs" / blob, (snap / name).parent))
    (folder / "refs" / "main").write_text(revisions[0])
    return root


@pytest.fixture(scope="module")
def caches(home: Path) -> Path:
    """Hub caches of the recipe's model at its revision and at two others."""
    weights = {"config.json": b"{}", "model.safetensors": b"weights"}
    return hub_cache(home / "hub", MODEL["repo"], [MODEL["revision"], OTHER, THIRD], weights)


@fuzz(examples=216)
@given(
    pinned=st.sampled_from([None, MODEL["revision"], OTHER]),
    asked=st.sampled_from([MODEL["revision"], OTHER, THIRD]),
    scratch=st.sampled_from([None, MODEL["revision"], OTHER, THIRD]),
    force=st.booleans(),
    form=st.sampled_from(["cache", "repo", "snapshot"]),
)
def test_no_pin_a_checkout_recipe_names_is_replaced_without_force(
    home: Path, caches: Path, pinned: str | None, asked: str, scratch: str | None, force: bool, form: str
) -> None:
    root = home / "guarded"
    files: dict[str, Any] = {"nix/recipes/qwen3.8-27b-exact.json": json.dumps(RECIPE)}
    manifest_rel = f"pkgs/weights/manifests/{MODEL['repo'].replace('/', '--')}.json"
    if pinned is not None:
        sha = hashlib.sha256(b"{}").hexdigest()
        files[manifest_rel] = {
            "repo": MODEL["repo"],
            "revision": pinned,
            "files": [{"path": "config.json", "size": 2, "sha256": sha, "lfs": False}],
        }
    lay_out(root, files)
    args = ["--root", str(root)]
    if scratch is not None:  # a copy of the recipe outside the checkout, naming `scratch`
        copy = json.loads(json.dumps(RECIPE))
        copy["model"]["revision"] = scratch
        (home / "scratch.json").write_text(json.dumps(copy))
        args += ["--recipe", str(home / "scratch.json")]
    folder = caches / ("models--" + MODEL["repo"].replace("/", "--"))
    where = {"cache": caches, "repo": folder, "snapshot": folder / "snapshots" / asked}[form]
    args += ["weights", f"{MODEL['repo']}@{asked}", "--snapshot", str(where)] + (["--force"] if force else [])
    before = (root / manifest_rel).read_bytes() if pinned else None
    with offline(home):
        code, out, err = run(args)
    assert_no_crash(code, out, err)
    after = (root / manifest_rel).read_bytes() if (root / manifest_rel).exists() else None
    named_by_checkout = pinned == MODEL["revision"]
    if named_by_checkout and asked != pinned and not force:
        event("guarded: refused")
        assert code == 2 and after == before and "pass --force" in err, err
    elif pinned is None or asked != pinned or force:
        event("written")
        assert code == 0, err
        assert json.loads(after or b"{}")["revision"] == asked
    else:
        event("already pinned")
        assert code == 0 and after == before


SHARD_NAMES = st.sampled_from(
    [
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
        "model.safetensors.index.json",
        "model-00001-of-00001.safetensors",
        "pytorch_model-00001-of-00002.bin",
        "pytorch_model.bin.index.json",
        "model.safetensors",
        "config.json",
        "model-00003-of-00002.safetensors",
        "model-0001-of-0002.safetensors",
    ]
)


def shards_complete(names: set[str]) -> bool:
    """The oracle: every `X-i-of-n.ext` set has its n shards and, for safetensors and bin, its index
    `X.ext.index.json`."""
    groups: dict[tuple[str, str, str], set[int]] = {}
    for name in names:
        found = re.fullmatch(r"(.+)-([0-9]+)-of-([0-9]+)(\.[a-z]+)", name)
        if found:
            groups.setdefault((found[1], found[4], found[3]), set()).add(int(found[2]))
    for (stem, ext, count), numbers in groups.items():
        if numbers != set(range(1, int(count) + 1)):
            return False
        if ext in (".safetensors", ".bin") and f"{stem}{ext}.index.json" not in names:
            return False
    return True


@fuzz(examples=100)
@given(names=st.sets(SHARD_NAMES, min_size=1, max_size=5))
def test_an_offline_snapshot_is_pinned_only_with_all_its_shards(home: Path, names: set[str]) -> None:
    """Without a listing (offline, files fetched one by one) a snapshot is pinned only when its shards'
    names and index say it is whole (an index naming a shard that is absent is refused as before)."""
    cache = home / "shards"
    shutil.rmtree(cache, ignore_errors=True)
    shards = {n: b"w" for n in names}
    for index in (n for n in names if n.endswith(".index.json")):
        stem = index.removesuffix(".index.json").rsplit(".", 1)
        listed = sorted(n for n in names if n.startswith(stem[0] + "-") and n.endswith("." + stem[1]))
        shards[index] = json.dumps({"weight_map": {f"w{i}": n for i, n in enumerate(listed)}}).encode()
    hub_cache(cache, "Org/Name", ["a" * 40], shards)
    root = home / "shard-checkout"
    lay_out(root, {"nix/recipes/qwen3.8-27b-exact.json": json.dumps(RECIPE)})
    with offline(home):
        code, out, err = run(
            ["--root", str(root), "weights", "Org/Name@" + "a" * 40, "--snapshot", str(cache)]
        )
    assert_no_crash(code, out, err)
    weights = any(n.endswith((".safetensors", ".bin")) for n in names)
    written = (root / "pkgs/weights/manifests/Org--Name.json").exists()
    event("pinned" if written else "refused")
    assert written == (code == 0)
    assert written == (weights and shards_complete(names)), (sorted(names), err)


@st.composite
def pinlock_command_lines(draw: st.DrawFn, home: Path) -> list[str]:
    """Offline command lines: options before and after the command, drawn values, stray words."""
    option_values = {
        "--root": [str(home / "checkout"), str(home), str(home / "none"), ""],
        "--recipe": [str(home / "checkout/nix/recipes/qwen3.8-27b-exact.json"), str(home / "x.json"), "-"],
        # a folder to make; a file and a dangling link, which mkdir met with FileExistsError
        "--cache-dir": [
            str(home / "c"),
            str(home / "checkout/nix/recipes/qwen3.8-27b-exact.json"),
            str(home / "dl"),
        ],
    }

    def options() -> list[str]:
        out: list[str] = []
        for option, usual in option_values.items():
            if draw(sometimes(3)):
                value = draw(st.one_of(st.sampled_from(usual), arg))
                out += [f"{option}={value}"] if draw(st.booleans()) else [option, value]
        return out + (["--force"] if draw(sometimes(4)) else [])

    command = draw(st.sampled_from(["status", "hash-path", "weights", None]))
    args = options()
    if command == "status":
        args += ["status", *options()]
    elif command == "hash-path":
        args += [
            "hash-path",
            draw(st.sampled_from([str(home / "checkout"), str(home / "none"), "/proc/self/fd"])),
        ]
        args += ["--base32"] if draw(st.booleans()) else []
    elif command == "weights":
        repo = draw(st.one_of(st.sampled_from([MODEL["repo"], "Org/Name", "noslash"]), arg))
        rev = draw(st.one_of(st.sampled_from([MODEL["revision"], OTHER, "main", OTHER.upper(), ""]), arg))
        args += ["weights", f"{repo}@{rev}" if rev else repo, "--snapshot", str(home / "hub"), *options()]
    if draw(sometimes(6)):
        args.insert(draw(st.integers(0, len(args))), draw(arg))
    return args


@fuzz(examples=300)
@given(st.data())
def test_drawn_command_lines_exit_as_documented(home: Path, caches: Path, data: st.DataObject) -> None:
    root = home / "checkout"
    lay_out(root, {"nix/recipes/qwen3.8-27b-exact.json": json.dumps(RECIPE)})
    args = data.draw(pinlock_command_lines(home))
    with offline(home), contextlib.chdir(home):
        code, out, err = run(args)
    assert_no_crash(code, out, err)
    event(f"exit {code}")
