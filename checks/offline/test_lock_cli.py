"""pinlock's command line and pin files: status, hash-path, root discovery, atomic writes, errors."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from checkhelpers.lock_testing import nix
from pinlock.cli import _parser, main
from pinlock.pins import PinError, find_root, read_json, write_json

REPO = Path(__file__).resolve().parents[2]


def _checkout(tmp_path: Path) -> Path:
    root = tmp_path / "checkout"
    (root / "nix" / "recipes").mkdir(parents=True)
    recipe = json.loads((REPO / "nix" / "recipes" / "qwen3.8-27b-exact.json").read_text())
    (root / "nix" / "recipes" / "qwen3.8-27b-exact.json").write_text(json.dumps(recipe))
    return root


def test_status_lists_absent_pins_and_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _checkout(tmp_path)
    assert main(["--root", str(root), "status"]) == 1
    out = capsys.readouterr().out
    assert "ABSENT  nix/pins/sglang-src.json narHash" in out
    assert "ABSENT  weights manifest Qwen/Qwen3.8-27B@1d4bf0f2ff60" in out
    assert "ABSENT  weights manifest incoai/Qwen3.8-27B-DFlash2@015e795645c7" in out


def _manifest(repo: str, revision: str) -> dict[str, object]:
    """A manifest in the contract's schema (one file; its bytes are b'{}')."""
    sha = hashlib.sha256(b"{}").hexdigest()
    return {
        "repo": repo,
        "revision": revision,
        "files": [{"path": "config.json", "size": 2, "sha256": sha, "lfs": False}],
    }


# A hash of the form Nix accepts (the sha256 of nothing; no pin here is fetched).
SRI = "sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="


def _all_pinned(root: Path) -> dict[str, Path]:
    recipe = json.loads((root / "nix/recipes/qwen3.8-27b-exact.json").read_text())
    owner, repo = recipe["engine"]["repo"].split("/")
    rev = recipe["engine"]["rev"]
    write_json(root / "nix/pins/sglang-src.json", {"owner": owner, "repo": repo, "rev": rev, "narHash": SRI})
    write_json(
        root / "nix/pins/sglang-cargo.json", {"rev": rev, "locks": ["rust/Cargo.lock"], "outputHashes": {}}
    )
    (root / "nix/pins/sglang-cargo-locks/rust").mkdir(parents=True)
    (root / "nix/pins/sglang-cargo-locks/rust/Cargo.lock").write_text("version = 4\n")
    manifests = {}
    for key in ("model", "drafter"):
        org, name = recipe[key]["repo"].split("/")
        manifests[key] = root / f"pkgs/weights/manifests/{org}--{name}.json"
        write_json(manifests[key], _manifest(recipe[key]["repo"], recipe[key]["revision"]))
    (root / "pkgs/server-env").mkdir(parents=True)
    (root / "pkgs/server-env/uv.lock").write_text("")
    return manifests


def test_status_passes_when_everything_is_pinned(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _checkout(tmp_path)
    manifests = _all_pinned(root)
    assert main(["--root", str(root), "status"]) == 0
    assert "ABSENT" not in capsys.readouterr().out
    # A manifest for another revision is not the pin.
    write_json(manifests["model"], _manifest("Qwen/Qwen3.8-27B", "1" * 40))
    assert main(["--root", str(root), "status"]) == 1
    assert "ABSENT  weights manifest Qwen/Qwen3.8-27B@1d4bf0f2ff60" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ('{"revision": "1d4bf0f2ff6012fd82039f2fa52739d0dd7c60c0"}', "exactly repo, revision, files"),
        ("{", "not valid JSON"),
        (None, "the manifest of Acme/Other, not Qwen/Qwen3.8-27B"),
    ],
)
def test_status_names_a_malformed_weights_manifest_and_the_fix(
    content: str | None, reason: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _checkout(tmp_path)
    manifests = _all_pinned(root)
    revision = json.loads(manifests["model"].read_text())["revision"]
    text = json.dumps(_manifest("Acme/Other", revision)) if content is None else content
    manifests["model"].write_text(text)
    assert main(["--root", str(root), "status"]) == 1
    (line,) = [ln for ln in capsys.readouterr().out.splitlines() if "Qwen/Qwen3.8-27B@" in ln]
    assert line.startswith("MALFORMED  weights manifest Qwen/Qwen3.8-27B@1d4bf0f2ff60: ")
    assert reason in line
    assert line.endswith(f"(delete it and run `nix run .#lock -- weights Qwen/Qwen3.8-27B@{revision}`)")


@pytest.mark.nix
def test_hash_path_prints_what_nix_prints(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f").write_text("content\n")
    assert main(["hash-path", str(tmp_path / "d")]) == 0
    assert capsys.readouterr().out.strip() == nix("nix", "hash", "path", str(tmp_path / "d"))
    assert main(["hash-path", "--base32", str(tmp_path / "d")]) == 0
    assert capsys.readouterr().out.strip() == nix(
        "nix-hash", "--type", "sha256", "--base32", str(tmp_path / "d")
    )


def test_hash_path_of_a_missing_path_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["hash-path", str(tmp_path / "nope")]) == 2
    assert f"pinlock: error: {tmp_path / 'nope'} does not exist" in capsys.readouterr().err


def test_console_script_help() -> None:
    result = subprocess.run([sys.executable, "-m", "pinlock.cli", "--help"], capture_output=True, text=True)
    assert result.returncode == 0
    for command in ("all", "src", "cargo", "weights", "uv", "status", "hash-path"):
        assert command in result.stdout


def test_root_discovery(tmp_path: Path) -> None:
    root = _checkout(tmp_path)
    (root / "pkgs" / "deep").mkdir(parents=True)
    assert find_root(root / "pkgs" / "deep") == root
    with pytest.raises(PinError, match="no nix/recipes/"):
        find_root(tmp_path)


def test_outside_a_checkout_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["status"]) == 2
    assert "pass --root" in capsys.readouterr().err


def test_weights_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _checkout(tmp_path)
    assert main(["--root", str(root), "weights", "Org/Name"]) == 2
    assert "ORG/NAME@REV" in capsys.readouterr().err
    assert main(["--root", str(root), "weights", "--snapshot", str(tmp_path)]) == 2
    assert "needs the repo" in capsys.readouterr().err
    assert main(["--root", str(root), "weights", "Org/Name", "--snapshot", str(tmp_path)]) == 2
    assert "is not a Hugging Face hub cache, nor a repo or a snapshot in one" in capsys.readouterr().err
    assert main(["--root", str(root), "weights", "Org/Name", "--snapshot", str(tmp_path / "nope")]) == 2
    assert f"--snapshot {tmp_path / 'nope'} does not exist" in capsys.readouterr().err
    assert main(["--root", str(root), "weights", "not a repo@" + "a" * 40]) == 2
    assert "not a Hugging Face repo id" in capsys.readouterr().err
    # A malformed revision is refused before any step runs (2, not a failed step's 1).
    assert main(["--root", str(root), "weights", "Org/Name@main"]) == 2
    assert "a commit is 40 lower-case hex digits, not 'main'" in capsys.readouterr().err
    # Upper case is refused with the spelling pins take, not folded silently (nor called "not 40 hex").
    assert main(["--root", str(root), "weights", "Org/Name@" + "A" * 40]) == 2
    assert f"is in upper case; write the commit in lower case, as git prints it: {'a' * 40}" in (
        capsys.readouterr().err
    )
    assert main(["--root", str(root), "--recipe", str(tmp_path / "nope.json"), "status"]) == 2
    assert "nope.json is missing" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--root", str(root), "cargo", "--set", "no-hash"])


def test_failed_step_keeps_going_and_reports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the snapshot check asks the Hub only when it may
    root = _checkout(tmp_path)
    cache = tmp_path / "hub" / "models--Org--Name"
    (cache / "snapshots" / ("a" * 40)).mkdir(parents=True)  # a hub cache whose snapshot holds no file
    (cache / "blobs").mkdir()
    (cache / "refs").mkdir()
    args = ["--root", str(root), "--cache-dir", str(tmp_path / "c")]
    assert main([*args, "weights", f"Org/Name@{'a' * 40}", "--snapshot", str(tmp_path / "hub")]) == 1
    err = capsys.readouterr().err
    assert "it holds no weights (no files" in err
    assert "1 step(s) failed: weights Org/Name; finished pins were kept" in err


def test_write_json_is_atomic_and_read_json_names_bad_files(tmp_path: Path) -> None:
    target = tmp_path / "pins" / "x.json"
    write_json(target, {"a": 1})
    assert read_json(target) == {"a": 1} and target.read_text().endswith("}\n")
    assert read_json(tmp_path / "absent.json") is None

    class Boom:
        pass

    with pytest.raises(TypeError):
        write_json(target, {"a": Boom()})
    assert read_json(target) == {"a": 1}  # the old file survives a failed write
    assert [p.name for p in target.parent.iterdir()] == ["x.json"]
    target.write_text("{")
    with pytest.raises(PinError, match="not valid JSON"):
        read_json(target)


def test_common_options_go_before_or_after_the_command(tmp_path: Path) -> None:
    before = _parser().parse_args(["--force", "--cache-dir", "c", "--root", "r", "src"])
    after = _parser().parse_args(["src", "--force", "--cache-dir", "c", "--root", "r"])
    for options in (before, after):
        assert (options.force, options.cache_dir, options.root) == (True, Path("c"), Path("r"))
    plain = _parser().parse_args(["weights"])
    assert (plain.force, plain.cache_dir, plain.root, plain.recipe) == (False, None, None, None)
    # As docs/lock.md writes it: `nix run .#lock -- weights ... --cache-dir DIR`.
    root = _checkout(tmp_path)
    snapshot = tmp_path / "hub" / "models--Org--Name" / "snapshots" / ("a" * 40)
    snapshot.mkdir(parents=True)
    args = ["weights", f"Org/Name@{'a' * 40}", "--snapshot", str(snapshot), "--root", str(root)]
    assert main([*args, "--cache-dir", str(tmp_path / "c")]) == 1  # ran the step (empty snapshot)
    assert (tmp_path / "c").is_dir()
