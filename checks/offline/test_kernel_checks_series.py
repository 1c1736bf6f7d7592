"""The kernel checks read the patch series from the runner's inputs (checks/gpu/series.py), and the stock
path they compare against is the released code: on the real sglang 0.5.20 wheel with the whole series
applied, `released_source` gives back the released file byte for byte for every file the series touches.
For gdn_backend.py, which two patches touch (0002, 0007), taking off 0002 alone, as the kernel check's
fixture once did, leaves 0007's `exact_verify` in it: the failure the lent H100 showed (21 errors)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import series  # checks/gpu/series.py, installed from checks/gpu
from checkhelpers.released_wheels import unpacked_wheel
from checkhelpers.sglang_series import SERIES, apply_series, copy_touched, touched_files

REPO = Path(__file__).resolve().parents[2]

GDN_BACKEND = "sglang/srt/layers/attention/linear/gdn_backend.py"


def test_the_series_comes_from_the_runners_inputs_only(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(series.SERIES_ENV, raising=False)
    with pytest.raises(RuntimeError, match=r"BITEXACT_SGLANG_SERIES is not set: .*--series patches/sglang"):
        series.series_dir()
    monkeypatch.setenv(series.SERIES_ENV, str(tmp_path))
    with pytest.raises(RuntimeError, match="holds no \\*.patch"):
        series.series_dir()
    monkeypatch.setenv(series.SERIES_ENV, str(REPO / "patches" / "sglang"))
    assert series.series() == SERIES and series.patch_named("0006-").name.startswith("0006-")


def patched_release(tmp_path: Path) -> tuple[Path, Path]:
    """(the released 0.5.20 tree, a copy of the files the series touches with the whole series applied)."""
    release = unpacked_wheel("sglang", "0.5.20")
    site = tmp_path / "site"
    copy_touched(release, site)
    apply_series(site, write_manifest=False)
    return release, site


@pytest.mark.network
def test_every_touched_file_comes_back_as_released(tmp_path: Path) -> None:
    release, site = patched_release(tmp_path)
    for rel in touched_files():
        if not (release / rel).is_file():
            continue  # a file the series adds has no released form
        got = series.released_source(site, rel, REPO / "patches" / "sglang")
        assert got == (release / rel).read_text(), rel


@pytest.mark.network
def test_taking_off_one_patch_of_two_leaves_the_other(tmp_path: Path) -> None:
    release, site = patched_release(tmp_path)
    touching = [p.name for p in SERIES if GDN_BACKEND in re.findall(r"a/python/(\S+)", p.read_text())]
    assert touching == ["0002-exact-gdn-verify.patch", "0007-exact-gdn-prefix-snapshot.patch"]
    only_0002 = tmp_path / "only-0002"
    only_0002.mkdir()
    shutil.copy(REPO / "patches" / "sglang" / touching[0], only_0002)
    partial = series.released_source(site, GDN_BACKEND, only_0002)
    assert "exact_verify" in partial  # 0007's hunks stay: not the released file
    whole = series.released_source(site, GDN_BACKEND, REPO / "patches" / "sglang")
    assert "exact_verify" not in whole and whole == (release / GDN_BACKEND).read_text()
