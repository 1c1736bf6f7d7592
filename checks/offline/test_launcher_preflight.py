"""exactlaunch.preflight and the CLI against the REAL released trees: sglang 0.5.20 and sgl-deep-gemm 0.2.0,
unpatched (refused) and with the repository's patch series applied (accepted)."""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from checkhelpers.driver_standins import install_driver
from checkhelpers.released_wheels import unpacked_wheel
from checkhelpers.sglang_series import apply_patch, apply_series, copy_touched
from exactlaunch import cli, load_recipe, manifest, preflight
from exactlaunch.preflight import check_deep_gemm, check_sglang, header_is_fenced, read_applied

REPO = Path(__file__).resolve().parents[2]
RECIPE_PATH = REPO / "nix" / "recipes" / "qwen3.8-27b-exact.json"
RECIPE = load_recipe(RECIPE_PATH)
SGLANG_SERIES = sorted((REPO / "patches" / "sglang").glob("*.patch"))
FENCE_PATCH = REPO / "patches" / "deep-gemm" / "0001-sm120-fence.patch"
# Tests using these fixtures get the markers (checkhelpers.markers).
FIXTURE_NEEDS = {"sglang_020": ("network",), "site": ("network",)}
TRITON_BACKEND = "sglang/srt/layers/attention/triton_backend.py"


@pytest.fixture(scope="module")
def sglang_020() -> Path:
    """The pristine sglang/ package of the 0.5.20 wheel (read only)."""
    return unpacked_wheel("sglang", "0.5.20") / "sglang"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, sglang_020: Path) -> Path:
    """A site-packages copy of the real sglang 0.5.20 and sgl-deep-gemm 0.2.0 trees with our series applied
    and its manifest written, as pkgs/sglang does (native extension modules left out: the series touches
    Python files only)."""
    if not SGLANG_SERIES:
        pytest.fail("patches/sglang/ holds no series yet (0001-bitexact-marker.patch is expected)")
    root = tmp_path_factory.mktemp("site-packages")
    shutil.copytree(sglang_020, root / "sglang", ignore=shutil.ignore_patterns("*.so"))
    apply_series(root, SGLANG_SERIES)
    shutil.copytree(unpacked_wheel("sgl-deep-gemm", "0.2.0") / "deep_gemm", root / "deep_gemm")
    apply_patch(root, FENCE_PATCH, 1)
    return root


def small_site(tmp_path: Path, sglang_020: Path, patches: list[Path], write_manifest: bool = True) -> Path:
    """Only the files the series touches, from the real 0.5.20 tree, with `patches` applied, and the real
    DeepGEMM 0.2.0 header fenced: enough for the preflight, without copying the whole package."""
    copy_touched(sglang_020.parent, tmp_path)
    apply_series(tmp_path, patches, write_manifest)
    header = tmp_path / RECIPE.deep_gemm_header
    header.parent.mkdir(parents=True)
    shutil.copyfile(unpacked_wheel("sgl-deep-gemm", "0.2.0") / RECIPE.deep_gemm_header, header)
    apply_patch(tmp_path, FENCE_PATCH, 1)
    return tmp_path


def test_refuses_the_real_unpatched_sglang(sglang_020: Path) -> None:
    (failure,) = check_sglang(sglang_020, RECIPE.engine_patches)
    assert failure.component == "sglang"
    assert "bitexact_patches.py is missing" in failure.problem and str(sglang_020) in failure.problem
    assert "patch -p2 --fuzz=0" in failure.fix


def test_accepts_sglang_after_the_real_series(site: Path) -> None:
    assert read_applied(site / "sglang" / "srt" / "bitexact_patches.py") == tuple(RECIPE.engine_patches)
    assert check_sglang(site / "sglang", RECIPE.engine_patches) == []


def test_refuses_the_marker_patch_alone_with_the_fence(tmp_path: Path, sglang_020: Path) -> None:
    """0001 writes the marker naming the whole series: the marker alone must not pass for the patches."""
    root = small_site(tmp_path, sglang_020, SGLANG_SERIES[:1], write_manifest=False)
    assert read_applied(root / "sglang" / "srt" / "bitexact_patches.py") == tuple(RECIPE.engine_patches)
    failures = preflight(RECIPE, sglang_dir=root / "sglang", deep_gemm_root=root)
    assert [f.component for f in failures] == ["sglang"]
    assert "bitexact_manifest.json is missing" in failures[0].problem
    assert "python -m exactlaunch.manifest write" in failures[0].fix
    # Nor can a manifest be written for it: the writer proves the series is applied first.
    with pytest.raises(manifest.ManifestError, match="0007-exact-gdn-prefix-snapshot.patch is not applied"):
        manifest.write(root, SGLANG_SERIES)


def test_refuses_a_hand_edit_of_one_patched_file_naming_it(tmp_path: Path, sglang_020: Path) -> None:
    root = small_site(tmp_path, sglang_020, SGLANG_SERIES)
    assert check_sglang(root / "sglang", RECIPE.engine_patches) == []
    edited = root / TRITON_BACKEND
    edited.write_text(edited.read_text().replace("def forward_extend", "def forward_extend ", 1))
    (failure,) = check_sglang(root / "sglang", RECIPE.engine_patches)
    assert failure.problem.startswith(f"{edited} differs from what the series produced")


def test_refuses_a_partly_reverted_tree_naming_the_files(tmp_path: Path, sglang_020: Path) -> None:
    root = small_site(tmp_path, sglang_020, SGLANG_SERIES)
    gemm_route = next(p for p in SGLANG_SERIES if p.name.startswith("0005-"))
    apply_patch(root, gemm_route, reverse=True)  # 0005 taken off after the manifest was written
    routed, *added = (f.problem for f in check_sglang(root / "sglang", RECIPE.engine_patches))
    assert routed.startswith(f"{root / 'sglang/srt/batch_invariant_ops/batch_invariant_ops.py'} differs")
    assert added == [
        f"{root / 'sglang/srt/batch_invariant_ops' / name} is missing"
        for name in ("exact_gemm.py", "exact_gemm_tiles.py")
    ]


def test_refuses_a_manifest_of_another_series(tmp_path: Path, sglang_020: Path) -> None:
    root = small_site(tmp_path, sglang_020, SGLANG_SERIES)
    data = json.loads((root / manifest.MANIFEST).read_text())
    data["series"] = data["series"][:-1]
    (root / manifest.MANIFEST).write_text(json.dumps(data))
    (failure,) = check_sglang(root / "sglang", RECIPE.engine_patches)
    assert "was written for the series" in failure.problem and "(a stale tree)" in failure.problem
    (root / manifest.MANIFEST).write_text("{")
    (failure,) = check_sglang(root / "sglang", RECIPE.engine_patches)
    assert "bitexact_manifest.json is unreadable" in failure.problem


def test_content_check_takes_under_100_ms_on_the_real_tree(site: Path) -> None:
    """The preflight re-hashes every touched file on each start; the figure is printed (pytest -s)."""
    timings = []
    for _ in range(5):
        start = time.perf_counter()
        assert check_sglang(site / "sglang", RECIPE.engine_patches) == []
        timings.append(time.perf_counter() - start)
    files = len(json.loads((site / manifest.MANIFEST).read_text())["files"])
    print(f"preflight sglang content check: {min(timings) * 1000:.1f} ms for {files} files (best of 5)")
    assert min(timings) < 0.1


def test_refuses_a_marker_that_differs_from_the_recipe(site: Path) -> None:
    shorter = RECIPE.engine_patches[:-1]
    (failure,) = check_sglang(site / "sglang", shorter)
    assert f"not in the recipe {[RECIPE.engine_patches[-1]]}" in failure.problem
    (failure,) = check_sglang(site / "sglang", tuple(RECIPE.engine_patches) + ("0005-extra.patch",))
    assert "missing ['0005-extra.patch']" in failure.problem
    (failure,) = check_sglang(site / "sglang", tuple(reversed(RECIPE.engine_patches)))
    assert "order differs" in failure.problem


def test_refuses_an_unreadable_marker(tmp_path: Path) -> None:
    (tmp_path / "srt").mkdir()
    (tmp_path / "srt" / "bitexact_patches.py").write_text("APPLIED = tuple(x for x in [])\n")
    (failure,) = check_sglang(tmp_path, RECIPE.engine_patches)
    assert "cannot read APPLIED" in failure.problem


@pytest.mark.network
def test_refuses_the_real_unfenced_deep_gemm_header() -> None:
    root = unpacked_wheel("sgl-deep-gemm", "0.2.0")
    assert not header_is_fenced((root / RECIPE.deep_gemm_header).read_text())
    (failure,) = check_deep_gemm(root, RECIPE.deep_gemm_header)
    assert failure.component == "deep_gemm" and "lacks the sm120 fence" in failure.problem
    assert "0001-sm120-fence.patch" in failure.fix


def test_accepts_the_real_header_after_the_fence_patch(site: Path) -> None:
    assert check_deep_gemm(site, RECIPE.deep_gemm_header) == []


@pytest.mark.network
def test_accepts_the_released_0_2_3_header() -> None:
    assert header_is_fenced((unpacked_wheel("sgl-deep-gemm", "0.2.3") / RECIPE.deep_gemm_header).read_text())


def test_a_commented_out_fence_does_not_count(site: Path) -> None:
    text = (site / RECIPE.deep_gemm_header).read_text()
    assert not header_is_fenced(text.replace("cutlass::arch::fence_view", "// cutlass::arch::fence_view"))


def test_missing_packages_are_named(tmp_path: Path) -> None:
    failures = preflight(RECIPE, sglang_dir=tmp_path / "nope", deep_gemm_root=tmp_path)
    assert [f.component for f in failures] == ["sglang", "deep_gemm"]
    assert "cannot read" in failures[1].problem


def test_preflight_finds_the_importable_packages(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(site))
    assert preflight(RECIPE) == []


# The CLI end to end: `--print`, refusal, and the exec of a ready tree (os.execvpe recorded, not run).


def _run(monkeypatch: pytest.MonkeyPatch, args: list[str], env: dict[str, str]) -> tuple[int, list[Any]]:
    calls: list[Any] = []
    monkeypatch.setattr(cli.os, "execvpe", lambda *a: calls.append(a))
    for key in (
        "BITEXACT_RECIPE",
        "BITEXACT_DEEP_GEMM",
        "SGLANG_DG_CACHE_DIR",
        "HF_HUB_CACHE",
        "BITEXACT_DRIVER_LIB",
        "LD_LIBRARY_PATH",
        "TRITON_LIBCUDA_PATH",
    ):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return cli.main(args), calls


def test_cli_execs_a_ready_tree(site: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.syspath_prepend(str(site))
    driver = install_driver(tmp_path / "driver")
    env = {
        "BITEXACT_RECIPE": str(RECIPE_PATH),
        "XDG_CACHE_HOME": str(tmp_path),
        "BITEXACT_DRIVER_LIB": str(driver),
        "LD_LIBRARY_PATH": "/caller/lib",
    }
    code, calls = _run(monkeypatch, ["--variant", "no-spec", "--port", "30001"], env)
    assert code is None or code == 0
    ((program, argv, child_env),) = calls
    assert program == sys.executable and argv[0] == sys.executable
    assert argv[-2:] == ["--port", "30001"] and "--speculative-algorithm" not in argv
    assert child_env["HF_HUB_OFFLINE"] == "1"
    assert Path(child_env["SGLANG_DG_CACHE_DIR"]).parent == tmp_path / "bitexact" / "deep-gemm"
    assert Path(child_env["SGLANG_DG_CACHE_DIR"]).is_dir()
    # The driver goes on the server's library path from its start, and Triton is told where it is.
    assert child_env["LD_LIBRARY_PATH"] == f"{driver}:/caller/lib"
    assert child_env["TRITON_LIBCUDA_PATH"] == str(driver)


def test_cli_refuses_to_start_without_a_driver(
    site: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """torch decides once whether CUDA is there: starting without the driver would serve nothing."""
    monkeypatch.syspath_prepend(str(site))
    env = {"BITEXACT_RECIPE": str(RECIPE_PATH), "BITEXACT_DRIVER_LIB": str(tmp_path)}
    code, calls = _run(monkeypatch, ["--variant", "no-spec"], env)
    assert code == 2 and calls == []
    err = capsys.readouterr().err
    assert (
        f"refusing to start: no NVIDIA driver library libcuda.so.1 in BITEXACT_DRIVER_LIB={tmp_path}" in err
    )


def test_cli_refuses_unpatched_and_says_which(
    sglang_020: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.syspath_prepend(str(sglang_020.parent))
    monkeypatch.syspath_prepend(str(unpacked_wheel("sgl-deep-gemm", "0.2.0")))
    code, calls = _run(monkeypatch, ["--recipe", str(RECIPE_PATH)], {})
    assert code == 2 and calls == []
    err = capsys.readouterr().err
    assert "refusing to start in exact mode" in err
    assert "sglang: " in err and "bitexact_patches.py is missing" in err
    assert "deep_gemm: " in err and "lacks the sm120 fence" in err


def test_cli_print_needs_no_preflight(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    args = ["--recipe", str(RECIPE_PATH), "--variant", "forced-reject", "--print"]
    code, calls = _run(monkeypatch, args, {"BITEXACT_DRIVER_LIB": str(tmp_path)})
    assert code == 0 and calls == []
    out = json.loads(capsys.readouterr().out)
    assert out["variant"] == "forced-reject" and out["exact"] is True
    assert out["env"]["SGLANG_SIMULATE_ACC_LEN"] == "1"
    assert out["argv"][0] == sys.executable
    # The host's driver is reported apart from the recipe's env (here: none, and why).
    assert "LD_LIBRARY_PATH" not in out["env"]
    assert "no NVIDIA driver library libcuda.so.1" in out["driver"]["error"]


def test_cli_print_shows_the_driver_it_would_use(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    driver = install_driver(tmp_path / "lib")
    env = {"BITEXACT_DRIVER_LIB": str(driver)}
    code, _ = _run(monkeypatch, ["--recipe", str(RECIPE_PATH), "--print"], env)
    assert code == 0
    shown = json.loads(capsys.readouterr().out)["driver"]
    assert shown["directory"] == str(driver) and shown["origin"] == "BITEXACT_DRIVER_LIB"
    assert shown["env"] == {"LD_LIBRARY_PATH": str(driver), "TRITON_LIBCUDA_PATH": str(driver)}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--", "--tp-size", "2"], "free arguments are not accepted"),
        (
            ["--tp-size", "2"],
            "unknown option --tp-size: bitexact-server takes --build-info, --gpus, --host, --list-variants, "
            "--log-dir,",
        ),
        (["--prt", "30001"], "unknown option --prt: did you mean --port?"),
        (["--port=30001", "--var", "no-spec"], "unknown option --var: did you mean --variant?"),
        (["extra"], "extra: `--` and free arguments are not accepted"),
        (["--variant", "nope"], "unknown variant `nope`"),
        ([], "no recipe"),
    ],
)
def test_cli_usage_errors(
    args: list[str], message: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    if args and args[0] == "--variant":
        args = ["--recipe", str(RECIPE_PATH)] + args
    code, calls = _run(monkeypatch, args, {})
    assert code == 2 and calls == []
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("port", ["70000", "0", "030000", "\u0663\u0660\u0660\u0660\u0660", "3e4", " 30000"])
def test_cli_rejects_a_bad_port_where_print_would(
    port: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Checked where it is appended (plan), so a start refuses what --print refuses: nothing is run."""
    for mode in ([], ["--print"]):
        code, calls = _run(monkeypatch, ["--recipe", str(RECIPE_PATH), f"--port={port}", *mode], {})
        assert code == 2 and calls == []
        assert f"--port: not a TCP port: {port!r}" in capsys.readouterr().err


@pytest.mark.parametrize(
    "args", [["--port", "30001", "--port", "30002"], ["--variant=no-spec", "--variant=recipe"]]
)
def test_cli_refuses_an_option_given_twice(
    args: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        _run(monkeypatch, ["--recipe", str(RECIPE_PATH), *args, "--print"], {})
    assert exit_info.value.code == 2
    assert f"{args[0].split('=')[0]} given twice" in capsys.readouterr().err


def test_cli_notes_hf_hub_offline_forced_over_the_callers_zero(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _ = _run(monkeypatch, ["--recipe", str(RECIPE_PATH), "--print"], {"HF_HUB_OFFLINE": "0"})
    captured = capsys.readouterr()
    assert code == 0 and json.loads(captured.out)["env"]["HF_HUB_OFFLINE"] == "1"
    assert "note: HF_HUB_OFFLINE='0' from the caller is replaced by '1'" in captured.err


def test_cli_notes_a_deep_gemm_outside_the_pinned_path(
    site: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.syspath_prepend(str(site))
    elsewhere = {
        "BITEXACT_RECIPE": str(RECIPE_PATH),
        "BITEXACT_DEEP_GEMM": str(tmp_path / "pinned-deep-gemm"),
    }
    assert _run(monkeypatch, ["--print"], elsewhere)[0] == 0
    assert "is not under BITEXACT_DEEP_GEMM" in capsys.readouterr().err
    assert _run(monkeypatch, ["--print"], elsewhere | {"BITEXACT_DEEP_GEMM": str(site)})[0] == 0
    assert "is not under" not in capsys.readouterr().err
