"""lab/card/assemble.py, the assembler of the end-to-end trees, on this machine.

Its wheel surgery on wheels written here; its lock lookups against the real uv.lock; and `build` end to end
on the real released wheels (sglang 0.5.20 for cp312 as `fetch` downloads it, sgl-deep-gemm 0.2.0): the
patched tree with the series and its manifest, the stock tree as released, DeepGEMM fenced, and the import
report written even though this machine lacks the GPU host's packages.
"""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

import pytest
from checkhelpers.released_wheels import REPO_ROOT, cache_dir, released_wheel

from lab.card import assemble

DIST_INFO = "demo-1.0.dist-info"


def write_wheel(path: Path, members: dict[str, bytes]) -> Path:
    """A wheel whose RECORD lists every member and itself, as pip writes it."""
    record = "".join(f"{name},sha256=unused,{len(body)}\n" for name, body in members.items())
    with zipfile.ZipFile(path, "w") as archive:
        for name, body in members.items():
            archive.writestr(name, body)
        archive.writestr(f"{DIST_INFO}/RECORD", record + f"{DIST_INFO}/RECORD,,\n")
    return path


def read_wheel(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def test_copy_wheel_drops_members_and_their_record_lines(tmp_path: Path) -> None:
    members = {
        "pkg/__init__.py": b"x = 1\n",
        "pkg/libbig.a": b"\0" * 64,
        f"{DIST_INFO}/METADATA": b"Name: demo\n",
    }
    wheel = write_wheel(tmp_path / "demo-1.0-py3-none-any.whl", members)
    assemble.copy_wheel(wheel, wheel, lambda name: not name.endswith(".a"))  # in place, as `fetch` slims
    got = read_wheel(wheel)
    assert set(got) == {"pkg/__init__.py", f"{DIST_INFO}/METADATA", f"{DIST_INFO}/RECORD"}
    assert got["pkg/__init__.py"] == b"x = 1\n"
    record = got[f"{DIST_INFO}/RECORD"].decode().splitlines()
    assert [line.split(",")[0] for line in record] == [
        "pkg/__init__.py",
        f"{DIST_INFO}/METADATA",
        f"{DIST_INFO}/RECORD",
    ]


def test_keep_for_hopper_keeps_python_and_sm90_only() -> None:
    version = assemble.SGLANG_KERNEL[1]
    kept = [
        "sgl_kernel/__init__.py",
        "sgl_kernel/sm90/common_ops.abi3.so",
        "triton_kernels/matmul.py",
        f"sglang_kernel-{version}.dist-info/METADATA",
    ]
    dropped = ["sgl_kernel/sm100/common_ops.abi3.so", "sgl_kernel/flash_ops.abi3.so", "other/__init__.py"]
    assert [name for name in kept + dropped if assemble.keep_for_hopper(name)] == kept


def test_every_package_fetched_from_the_lock_is_in_it() -> None:
    versions = assemble.lock_versions()
    missing = [name for name in assemble.FROM_LOCK if name not in versions]
    assert not missing, f"FROM_LOCK names packages uv.lock lacks (or spells them unnormalised): {missing}"
    assert versions["sgl-deep-gemm"] == "0.2.0"  # the release the fence patch is written for


def test_find_one_names_the_fetch_step(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match=r"no sglang-\*\.whl in .*run `assemble.py fetch` first"):
        assemble.find_one([tmp_path], "sglang-*.whl")


@pytest.fixture(scope="module")
def e2e_wheels() -> Path:
    """sglang 0.5.20's cp312 wheel, downloaded by assemble's own pip_download (as `fetch` does), cached."""
    folder = cache_dir() / "e2e-wheels"
    if not sorted(folder.glob("sglang-0.5.20-cp312-*.whl")):
        folder.mkdir(parents=True, exist_ok=True)
        assemble.pip_download("sglang==0.5.20", folder)
    return folder


@pytest.mark.network
def test_build_assembles_both_trees_from_the_released_wheels(e2e_wheels: Path, tmp_path: Path) -> None:
    extra = tmp_path / "wheels"
    extra.mkdir()
    shutil.copy(released_wheel("sgl-deep-gemm", "0.2.0"), extra)
    # sglang-kernel's slim zip: only its layout matters to `build` (the 383 MB wheel stays on PyPI here)
    kernel = {
        "sgl_kernel/__init__.py": b"",
        f"sglang_kernel-{assemble.SGLANG_KERNEL[1]}.dist-info/METADATA": b"",
    }
    write_wheel(extra / assemble.SLIM_KERNEL, kernel)
    work = tmp_path / "work"

    status = assemble.build([e2e_wheels, extra], work)

    report = json.loads((work / "assemble-report.json").read_text())
    assert status == (1 if report["patched"] or report["stock"] else 0)
    assert set(report) == {"patched", "stock", "host"}
    patched, stock = work / "patched" / "sglang", work / "stock" / "sglang"
    series = sorted(p.name for p in (REPO_ROOT / "patches" / "sglang").glob("*.patch"))
    assert (patched / "srt" / "bitexact_manifest.json").is_file()
    assert all(name in (patched / "srt" / "bitexact_patches.py").read_text() for name in series)
    assert not (stock / "srt" / "bitexact_patches.py").exists(), "the stock tree must stay as released"
    fenced = work / "deps" / "deep_gemm" / "include" / "deep_gemm" / "impls" / "sm120_bf16_gemm.cuh"
    assert "fence_view_async_shared" in fenced.read_text()
    assert (work / "deps" / "sgl_kernel" / "__init__.py").is_file()
    # a second build over the same work folder reuses what is there (patches are not applied twice)
    assert assemble.build([e2e_wheels, extra], work) == status
