"""pinlock: where a pin is written and what a pin's revision says (where a pin lands, what it names).

Found by reviewing pinlock as a new user would:
- a pin target that is a folder, a pins folder that is a file or on a read-only file system: the step
  hashed every file first, then said "[Errno 21] Is a directory: '.x.json.tmp' -> 'x.json'" or "[Errno 17]
  File exists" (naming a temporary file, or the wrong thing); now refused before any work (one guard,
  pinlock.guard.check_target, for every pin file);
- --cache-dir a file or a dangling link: an internal error (FileExistsError from mkdir);
- --root naming nothing: told that the recipe is missing;
- a source pin whose rev has a digit too many or white space: shortened to 12 digits, "pins
  sgl-project/sglang@542a043f1b68, the recipe's engine is sgl-project/sglang@542a043f1b68".
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from pinlock import hf
from pinlock.cli import main

REPO = Path(__file__).resolve().parents[2]
REV = "a" * 40
ENGINE_REV = "542a043f1b68796d269ef1ee11be7865f8d4a5f1"
GOOD_SRI = "sha256-" + base64.b64encode(b"x" * 32).decode()
MANIFEST = Path("pkgs/weights/manifests/Org--Name.json")


def _checkout(tmp_path: Path) -> Path:
    root = tmp_path / "checkout"
    (root / "nix" / "recipes").mkdir(parents=True)
    shutil.copy(REPO / "nix" / "recipes" / "qwen3.8-27b-exact.json", root / "nix" / "recipes")
    return root


def _hub(tmp_path: Path) -> Path:
    """A hub cache holding Org/Name@REV (config.json and one safetensors file), as huggingface_hub lays it."""
    folder = tmp_path / "hub" / "models--Org--Name"
    snap = folder / "snapshots" / REV
    (folder / "blobs").mkdir(parents=True)
    snap.mkdir(parents=True)
    for name, data in {"config.json": b"{}", "model.safetensors": b"w"}.items():
        blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
        (folder / "blobs" / blob).write_bytes(data)
        (snap / name).symlink_to(Path("../../blobs") / blob)
    (folder / "refs").mkdir()
    (folder / "refs" / "main").write_text(REV)
    return tmp_path / "hub"


def _weights(root: Path, hub: Path, *extra: str) -> list[str]:
    return ["--root", str(root), *extra, "weights", f"Org/Name@{REV}", "--snapshot", str(hub)]


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


@pytest.mark.parametrize(
    ("what", "message"),
    [
        ("the pin is a folder", r"Org--Name.json is a directory, where a JSON file belongs: remove it"),
        ("the pins folder is a file", r"pkgs/weights/manifests is a file, where a folder belongs"),
        ("the pins folder is a dangling link", r"leads out of the checkout"),
    ],
)
def test_a_pin_target_that_cannot_be_written_is_refused_before_the_work(
    what: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, hub = _checkout(tmp_path), _hub(tmp_path)
    folder = root / MANIFEST.parent
    folder.parent.mkdir(parents=True)
    if what == "the pin is a folder":
        (root / MANIFEST).mkdir(parents=True)
    elif what == "the pins folder is a file":
        folder.write_text("")
    else:
        folder.symlink_to(tmp_path / "nowhere")
    assert main(_weights(root, hub)) in (1, 2)
    err = capsys.readouterr().err
    assert "hashing" not in err, err  # refused before the snapshot was read
    assert "Errno" not in err and "internal error" not in err, err
    assert f"cannot write the pin {MANIFEST}" in err or "leads out" in err, err
    assert re.search(message, err), err


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None, reason="a read-only tmpfs mount needs root"
)
def test_a_read_only_pins_folder_is_named_as_such(tmp_path: Path) -> None:
    root, hub = _checkout(tmp_path), _hub(tmp_path)
    folder = root / MANIFEST.parent
    folder.mkdir(parents=True)
    run = (
        f"mount -t tmpfs -o ro tmpfs {folder} && "
        f"{sys.executable} -m pinlock.cli {' '.join(_weights(root, hub))}"
    )
    done = subprocess.run(["unshare", "-m", "sh", "-c", run], capture_output=True, text=True)
    if "mount:" in done.stderr:
        pytest.skip(f"cannot mount here: {done.stderr.strip()}")
    assert done.returncode == 1, done.stderr
    assert "manifests cannot be written (the file system is mounted read-only)" in done.stderr
    assert "hashing" not in done.stderr


@pytest.mark.parametrize("kind", ["file", "dangling link"])
def test_a_cache_dir_that_is_no_folder_is_a_usage_error(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, hub = _checkout(tmp_path), _hub(tmp_path)
    cache = tmp_path / "c"
    if kind == "file":
        cache.write_text("")
    else:
        cache.symlink_to(tmp_path / "nowhere" / "x")
    assert main(_weights(root, hub, "--cache-dir", str(cache))) == 2
    err = capsys.readouterr().err
    assert "internal error" not in err, err
    expected = (
        "is a file, where a folder belongs" if kind == "file" else "is a symbolic link that leads nowhere"
    )
    assert f"--cache-dir: {cache} {expected}" in err, err


def test_a_root_that_is_not_there_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--root", str(tmp_path / "none"), "status"]) == 2
    assert f"--root {tmp_path / 'none'} does not exist" in capsys.readouterr().err
    (tmp_path / "f").write_text("")
    assert main(["--root", str(tmp_path / "f"), "status"]) == 2
    assert "is not a directory" in capsys.readouterr().err


def _src_pin(root: Path, rev: str) -> None:
    pin = {"owner": "sgl-project", "repo": "sglang", "rev": rev, "narHash": GOOD_SRI}
    (root / "nix" / "pins").mkdir(parents=True, exist_ok=True)
    (root / "nix" / "pins" / "sglang-src.json").write_text(json.dumps(pin))


@pytest.mark.parametrize(
    ("rev", "line"),
    [
        (ENGINE_REV + "0", "MALFORMED  nix/pins/sglang-src.json narHash: nix/pins/sglang-src.json: rev: '"),
        (ENGINE_REV + " ", "has white space around it; give the 40 hex digits alone: " + ENGINE_REV),
        (ENGINE_REV[:39] + "0", f"pins sgl-project/sglang@{ENGINE_REV[:39]}0, the recipe's engine is"),
    ],
)
def test_a_source_pin_whose_rev_only_looks_right_is_told_apart(
    rev: str, line: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _checkout(tmp_path)
    _src_pin(root, rev)
    assert main(["--root", str(root), "status"]) == 1
    out = capsys.readouterr().out
    src = next(row for row in out.splitlines() if "sglang-src.json" in row)
    assert line in src, src
    assert not src.startswith("pinned"), src


def test_revision_problems_say_what_is_wrong() -> None:
    assert "white space" in (hf.revision_problem(f" {REV}\n") or "")
    assert "41 hex digits; a commit is 40" in (hf.revision_problem(REV + "a") or "")
    assert hf.revision_problem(REV) is None


@pytest.mark.parametrize("repo", ["a--b/c", "a/b--c", "Org/Na..me", "Org/Name.git"])
def test_repo_ids_the_hub_refuses_are_refused(repo: str) -> None:
    """`a--b/c` and `a/b--c` have one cache folder (models--a--b--c) and one manifest (a--b--c.json):
    pinning one replaced the other's pin, without --force."""
    with pytest.raises(hf.ManifestError, match=r"holds -- or \.\. or ends in \.git, which the Hub refuses"):
        hf.check_repo(repo)
    assert hf.check_source_repo("sgl-project/sglang") == "sgl-project/sglang"


def test_pinning_a_repo_that_shares_a_manifest_file_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _checkout(tmp_path)
    (root / "pkgs/weights/manifests").mkdir(parents=True)
    held = {"repo": "a/b--c", "revision": "b" * 40, "files": []}
    (root / "pkgs/weights/manifests/a--b--c.json").write_text(json.dumps(held))
    assert main(["--root", str(root), "weights", f"a--b/c@{REV}"]) == 2
    assert "which the Hub refuses" in capsys.readouterr().err
    assert json.loads((root / "pkgs/weights/manifests/a--b--c.json").read_text()) == held


@pytest.mark.parametrize("value", ["sha256-abc", "sha256-" + "A" * 43 + "= ", "sha256-" + "_" * 43 + "="])
def test_a_cargo_hash_given_by_hand_has_nix_form(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    """`cargo --set NAME=HASH` is written into the pin as given; a hash of the wrong form was taken (and
    the step went to the network) rather than refused as the usage error it is."""
    with pytest.raises(SystemExit) as leave:
        main(["cargo", "--set", f"foo-1.0={value}"])
    assert leave.value.code == 2
    assert "is not an SRI sha256" in capsys.readouterr().err
