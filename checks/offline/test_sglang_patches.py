"""The SGLang patch series against the real 0.5.20 and 0.5.21 wheel trees.

Policy: every patch applies in name order with `patch -p2 --fuzz=0` (the wheel's site-packages layout;
the git tree takes `-p1`). Fuzz is refused because a hunk applied with ignored context lines may land in
the wrong place silently. Offsets are accepted: the two releases number their lines differently, so a
hunk that matches all its context exactly must be allowed to move; exact context is what makes that safe.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import sglang_tree  # checks/gpu/sglang_tree.py, installed from checks/gpu
from checkhelpers.released_wheels import REPO_ROOT, unpacked_wheel
from checkhelpers.sglang_series import apply_series, copy_touched
from exactlaunch import manifest

SERIES_DIR = REPO_ROOT / "patches" / "sglang"
RECIPE = REPO_ROOT / "nix" / "recipes" / "qwen3.8-27b-exact.json"
MARKER = "sglang/srt/bitexact_patches.py"
RELEASES = ("0.5.20", "0.5.21")
ALLOWED_PREFIX = "python/sglang/"
# Tests using these fixtures get the markers (checkhelpers.markers).
FIXTURE_NEEDS = {"patched_tree": ("network",)}


def series() -> list[Path]:
    return sorted(SERIES_DIR.glob("*.patch"))


def recipe_patches() -> list[str]:
    return json.loads(RECIPE.read_text())["engine"]["patches"]


def touched_paths(patch: Path) -> list[str]:
    """Every path named by the diff headers (`diff --git`, `---`, `+++`), prefixes a/ b/ stripped."""
    paths: list[str] = []
    for line in patch.read_text().splitlines():
        if line.startswith("diff --git "):
            match = re.fullmatch(r"diff --git a/(\S+) b/(\S+)", line)
            assert match, f"{patch.name}: unparsable header {line!r}"
            paths += [match.group(1), match.group(2)]
        elif line.startswith(("--- ", "+++ ")):
            name = line[4:].split("\t")[0]
            if name == "/dev/null":
                continue
            assert name[:2] in ("a/", "b/"), f"{patch.name}: header {line!r} lacks the a/ or b/ prefix"
            paths.append(name[2:])
        elif line.startswith(("rename ", "copy ")):
            paths.append(line.split(" ", 2)[2])
    return paths


def test_series_is_the_recipes_list() -> None:
    assert [p.name for p in series()] == recipe_patches(), (
        f"patches/sglang/ holds {[p.name for p in series()]}, the recipe's engine.patches is "
        f"{recipe_patches()}: add the missing patch files (or fix the recipe)"
    )


@pytest.mark.parametrize("patch", series(), ids=lambda p: p.name)
def test_patch_touches_only_python_sglang(patch: Path) -> None:
    paths = touched_paths(patch)
    assert paths, f"{patch.name} names no files"
    outside = [p for p in paths if not p.startswith(ALLOWED_PREFIX)]
    assert not outside, f"{patch.name} touches paths outside {ALLOWED_PREFIX}: {outside}"


@pytest.fixture(scope="module", params=RELEASES)
def patched_tree(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the release's site-packages `sglang/` with the whole series applied."""
    version: str = request.param
    pristine = unpacked_wheel("sglang", version)
    root = tmp_path_factory.mktemp(f"sglang-{version}")
    shutil.copytree(pristine / "sglang", root / "sglang", symlinks=True)
    for patch in series():
        result = subprocess.run(
            ["patch", "-p2", "--fuzz=0", "--batch", "--forward", "--no-backup-if-mismatch", "-i", str(patch)],
            cwd=root,
            capture_output=True,
            text=True,
        )
        log = result.stdout + result.stderr
        assert result.returncode == 0, f"{patch.name} does not apply to sglang {version}:\n{log}"
        assert "fuzz" not in log.lower(), f"{patch.name} needed fuzz on sglang {version}:\n{log}"
    rejects = sorted(str(p.relative_to(root)) for p in root.rglob("*.rej"))
    assert not rejects, f"reject files left in the sglang {version} tree: {rejects}"
    manifest.write(root, series())  # as pkgs/sglang does after the series
    return root


def test_manifest_of_the_applied_series_verifies(patched_tree: Path) -> None:
    """The preflight's content manifest, written on each release's tree, covers every file git names."""
    written = json.loads((patched_tree / manifest.MANIFEST).read_text())
    assert [s["name"] for s in written["series"]] == recipe_patches()
    numstat = subprocess.run(
        ["git", "apply", "--numstat", "-p2", *map(str, series())], capture_output=True, text=True, check=True
    )
    assert sorted(written["files"]) == sorted({line.split("\t")[2] for line in numstat.stdout.splitlines()})
    assert manifest.verify(patched_tree, recipe_patches()) == []


def test_series_applies_and_marker_matches(patched_tree: Path) -> None:
    marker = patched_tree / MARKER
    assert marker.is_file(), f"{MARKER} missing after applying the series"
    module = ast.parse(marker.read_text())
    applied = [
        ast.literal_eval(node.value)
        for node in module.body
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["APPLIED"]
    ]
    assert len(applied) == 1, f"{MARKER} must assign APPLIED exactly once"
    assert isinstance(applied[0], tuple), "APPLIED must be a tuple of patch file names"
    assert list(applied[0]) == recipe_patches(), "APPLIED differs from the recipe's engine.patches"


def test_patched_python_compiles(patched_tree: Path) -> None:
    """Every file the series touches is still valid Python after patching."""
    touched = sorted({p for patch in series() for p in touched_paths(patch)})
    for rel in touched:
        path = patched_tree / rel.removeprefix("python/")
        if path.suffix == ".py" and path.exists():
            compile(path.read_text(), str(path), "exec")


def test_gpu_bootstrap_imports_marker_without_sglang_init(patched_tree: Path) -> None:
    """checks/gpu/sglang_tree.py loads modules from the patched tree and never runs sglang/__init__.py."""
    script = (
        "import sys; import sglang_tree; from pathlib import Path\n"
        "sglang_tree.install(Path(sys.argv[1]))\n"
        "from sglang.srt.bitexact_patches import APPLIED\n"
        "assert 'sglang.lang' not in sys.modules, 'sglang/__init__.py ran'\n"
        "print(','.join(APPLIED))\n"
    )
    result = subprocess.run([sys.executable, "-c", script, str(patched_tree)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().split(",") == recipe_patches()


def test_gpu_bootstrap_placeholders_refuse_to_run() -> None:
    missing = sglang_tree._placeholder("Client", "not_installed_pkg")
    assert missing.Sub is not None  # attribute chains resolve, for module-level imports and annotations
    with pytest.raises(sglang_tree.MissingDependency, match="not_installed_pkg"):
        missing()
    assert sglang_tree.tree_problem(None) is not None


@pytest.mark.network  # the released 0.5.20 wheel
def test_gpu_bootstrap_refuses_a_tree_without_its_manifest(tmp_path: Path) -> None:
    """The GPU checks take a tree only with the manifest of the series applied to it."""
    copy_touched(unpacked_wheel("sglang", "0.5.20"), tmp_path)
    apply_series(tmp_path, series()[:1], write_manifest=False)
    assert "bitexact_manifest.json is missing" in str(sglang_tree.tree_problem(tmp_path))
    apply_series(tmp_path, series()[1:], write_manifest=False)
    manifest.write(tmp_path, series())
    assert sglang_tree.tree_problem(tmp_path) is None
    (tmp_path / "sglang/srt/bitexact_patches.py").write_text("APPLIED = ()\n")
    assert "bitexact_patches.py differs from what the series produced" in str(
        sglang_tree.tree_problem(tmp_path)
    )
