"""The image entrypoint's preflight, run as the image runs it (a subprocess with the image's environment
variables): nvidia-smi behind a stand-in executable printing recorded real-format output, a hub cache laid
out by nix/lib/hf-cache.nix's plan, and the real sglang 0.5.20 / sgl-deep-gemm trees, stock and patched."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hfcache_support import RECIPE_PATH, REPO, materialize, nix_eval, nix_str, write_locked
from released_wheels import unpacked_wheel
from sglang_series import apply_series, copy_touched

sys.path.insert(0, str(REPO / "images" / "entrypoint" / "src"))

from image_entrypoint.checks import PreflightError  # noqa: E402
from image_entrypoint.gpu import QUERY, Card, check_card, parse_query  # noqa: E402
from image_entrypoint.main import repos_named, server_command  # noqa: E402

RECIPE = json.loads(RECIPE_PATH.read_text())
MODEL, DRAFTER = RECIPE["model"], RECIPE["drafter"]
# `nvidia-smi --query-gpu=name,compute_cap --format=csv,noheader` as the two cards print it: the lent
# H200 (named plainly 'NVIDIA H200', compute capability 9.0) and the recipe's card (its name as the
# recipe records it, sm_120).
H200 = "NVIDIA H200, 9.0\n"
BLACKWELL = "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition, 12.0\n"
NO_DRIVER = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
    "Make sure that the latest NVIDIA driver is installed and running.\n"
)
CARD = Card(slug="rtx-pro-6000-blackwell", name=RECIPE["card"]["name"], compute_cap="12.0")
FENCED_HEADER = "deep_gemm/include/deep_gemm/impls/sm120_bf16_gemm.cuh"
# Tests using these fixtures get the markers (checks/conftest.py).
FIXTURE_NEEDS = {"engines": ("network",), "image": ("nix",)}


def fake_nvidia_smi(directory: Path, stdout: str, code: int = 0) -> Path:
    """An executable that answers only the entrypoint's exact query, like nvidia-smi would."""
    exe = directory / "nvidia-smi"
    answer = directory / "nvidia-smi.out"
    answer.write_text(stdout)
    expected = " ".join(QUERY)
    exe.write_text(
        "#!/bin/sh\n"
        f'if [ "$*" != "{expected}" ]; then echo "unexpected query: $*" >&2; exit 64; fi\n'
        f"cat {answer}\n"
        f"exit {code}\n"
    )
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return exe


def test_parse_recorded_output() -> None:
    assert parse_query(H200 + BLACKWELL) == [
        parse_query(H200)[0],
        parse_query(BLACKWELL)[0],
    ]
    (gpu,) = parse_query(BLACKWELL)
    assert (gpu.name, gpu.compute_cap) == (RECIPE["card"]["name"], RECIPE["card"]["computeCapability"])
    with pytest.raises(PreflightError, match="cannot read nvidia-smi's line"):
        parse_query("garbage\n")


def test_card_check() -> None:
    assert check_card(parse_query(BLACKWELL), CARD, allow_other=False) == []
    with pytest.raises(PreflightError, match=r"wrong card: .* sees NVIDIA H200 \(compute capability 9.0\)"):
        check_card(parse_query(H200), CARD, allow_other=False)
    with pytest.raises(PreflightError, match="wrong card"):  # one wrong card among several is enough
        check_card(parse_query(BLACKWELL + H200), CARD, allow_other=False)
    (warning,) = check_card(parse_query(H200), CARD, allow_other=True)
    assert "BITEXACT_ALLOW_OTHER_CARD=1" in warning


def test_repos_named_by_variants() -> None:
    argv = RECIPE["launch"]["argv"]
    assert repos_named(argv) == [MODEL["repo"], DRAFTER["repo"]]
    assert server_command("no-spec", "8000") == [
        "bitexact-server",
        "--variant",
        "no-spec",
        "--host",
        "0.0.0.0",
        "--port",
        "8000",
    ]


def _patch(root: Path, patch: Path, strip: int) -> None:
    cmd = ["patch", f"-p{strip}", "--fuzz=0", "--batch", "--forward", "-i", str(patch)]
    done = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.fixture(scope="module")
def engines(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Site-packages roots: `patched` (the files of sglang 0.5.20 that our series touches, with the series
    and its manifest, DeepGEMM 0.2.0 with our fence) and `stock` (the released sglang 0.5.20 and
    sgl-deep-gemm 0.2.0 as shipped)."""
    patched = tmp_path_factory.mktemp("patched")
    copy_touched(unpacked_wheel("sglang", "0.5.20"), patched)
    apply_series(patched)
    header = patched / FENCED_HEADER
    header.parent.mkdir(parents=True)
    (patched / "deep_gemm" / "__init__.py").write_text("")
    shutil.copy(unpacked_wheel("sgl-deep-gemm", "0.2.0") / FENCED_HEADER, header)
    _patch(patched, REPO / "patches" / "deep-gemm" / "0001-sm120-fence.patch", 1)

    stock = tmp_path_factory.mktemp("stock")
    (stock / "sglang").symlink_to(unpacked_wheel("sglang", "0.5.20") / "sglang")
    (stock / "deep_gemm").symlink_to(unpacked_wheel("sgl-deep-gemm", "0.2.0") / "deep_gemm")
    return {"patched": patched, "stock": stock}


@pytest.fixture()
def image(tmp_path: Path, engines: dict[str, Path]) -> dict[str, Any]:
    """The image's environment for the preflight: recipe, hub cache and spec from the Nix plan, JIT
    cache, nvidia-smi on the recipe's card, libcuda stood in by libc (a library that loads)."""
    model_files = {"config.json": b"{}", "model-00001-of-00001.safetensors": b"\0" * 64}
    locked = write_locked(tmp_path, [(MODEL, model_files), (DRAFTER, {"config.json": b"{}"})])
    files, manifests = locked["files"], locked["manifests"]
    reads = " ".join(
        f"(hf.readManifest {{ manifestsDir = /. + {nix_str(str(manifests))}; repo = {nix_str(e['repo'])}; "
        f"revision = {nix_str(e['revision'])}; }})"
        for e in (MODEL, DRAFTER)
    )
    plan = nix_eval(
        f"let hf = import ./nix/lib/hf-cache.nix; ms = [ {reads} ]; in "
        "{ layout = hf.cacheLayout ms; specs = builtins.concatMap hf.fetchSpecs ms; "
        "completeness = hf.completenessSpec ms; }"
    )
    cache = tmp_path / "hub"
    materialize(
        plan["layout"],
        {s["name"]: files / s["repo"].replace("/", "--") / s["path"] for s in plan["specs"]},
        cache,
    )
    spec = tmp_path / "weights.json"
    spec.write_text(json.dumps(plan["completeness"]))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    env = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "PYTHONPATH": os.pathsep.join(
            [
                str(REPO / "images" / "entrypoint" / "src"),
                str(REPO / "pkgs" / "server" / "src"),
                str(engines["patched"]),
            ]
        ),
        "BITEXACT_RECIPE": str(RECIPE_PATH),
        "BITEXACT_HF_HUB_CACHE": str(cache),
        "BITEXACT_WEIGHTS_SPEC": str(spec),
        "BITEXACT_JIT_CACHE": str(tmp_path / "jit"),
        "BITEXACT_NVIDIA_SMI": str(fake_nvidia_smi(bin_dir, BLACKWELL)),
        "BITEXACT_LIBCUDA": "libc.so.6",
    }
    return {"env": env, "cache": cache, "bin": bin_dir, "tmp": tmp_path}


def entrypoint(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "image_entrypoint.main", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def refused(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert done.stderr.startswith("bitexact-entrypoint: refusing to start: ")
    return done.stderr


def test_passes_on_the_recipes_card_with_complete_weights_and_patched_engine(image: dict[str, Any]) -> None:
    home = image["tmp"] / "jit" / "home"  # the image's HOME lies in the (here empty) cache volume
    done = entrypoint({**image["env"], "HOME": str(home)}, "--preflight-only")
    assert done.returncode == 0, done.stderr
    assert "preflight passed" in done.stderr
    assert home.is_dir()


def test_execs_the_launcher_reachable_from_outside(image: dict[str, Any]) -> None:
    server = image["bin"] / "bitexact-server"
    server.write_text('#!/bin/sh\necho "launched: $*"\n')
    server.chmod(0o755)
    done = entrypoint(image["env"], "--port", "8123", "--variant", "no-spec")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "launched: --variant no-spec --host 0.0.0.0 --port 8123\n"


def test_refuses_a_wrong_card(image: dict[str, Any]) -> None:
    fake_nvidia_smi(image["bin"], H200)
    message = refused(entrypoint(image["env"], "--preflight-only"))
    assert "wrong card: the recipe is for NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition" in message
    assert "sees NVIDIA H200 (compute capability 9.0)" in message
    allowed = entrypoint({**image["env"], "BITEXACT_ALLOW_OTHER_CARD": "1"}, "--preflight-only")
    assert allowed.returncode == 0 and "warning: wrong card" in allowed.stderr


def test_refuses_without_a_gpu(image: dict[str, Any]) -> None:
    fake_nvidia_smi(image["bin"], NO_DRIVER, code=9)
    message = refused(entrypoint(image["env"], "--preflight-only"))
    assert "no GPU visible" in message and "exited 9" in message and "--gpus all" in message
    gone = {**image["env"], "BITEXACT_NVIDIA_SMI": str(image["tmp"] / "absent" / "nvidia-smi")}
    assert "is not in the container" in refused(entrypoint(gone, "--preflight-only"))
    fake_nvidia_smi(image["bin"], BLACKWELL)
    no_driver = {**image["env"], "BITEXACT_LIBCUDA": "libcuda-that-is-not-here.so.1"}
    assert "does not load" in refused(entrypoint(no_driver, "--preflight-only"))


def test_refuses_missing_weights(image: dict[str, Any]) -> None:
    snapshot = image["cache"] / "models--Qwen--Qwen3.8-27B" / "snapshots" / MODEL["revision"]
    (snapshot / "model-00001-of-00001.safetensors").unlink()
    message = refused(entrypoint(image["env"], "--preflight-only"))
    assert f"incomplete weights for {MODEL['repo']}@{MODEL['revision']}" in message
    assert "1 missing (model-00001-of-00001.safetensors)" in message


def test_refuses_a_short_file(image: dict[str, Any], tmp_path: Path) -> None:
    snapshot = image["cache"] / "models--Qwen--Qwen3.8-27B" / "snapshots" / MODEL["revision"]
    shard = snapshot / "model-00001-of-00001.safetensors"
    short = tmp_path / "short"
    short.write_bytes(b"\0" * 10)
    shard.unlink()
    shard.symlink_to(short)
    assert "(10 of 64 bytes)" in refused(entrypoint(image["env"], "--preflight-only"))


def test_refuses_a_cache_whose_ref_points_elsewhere(image: dict[str, Any]) -> None:
    (image["cache"] / "models--incoai--Qwen3.8-27B-DFlash2" / "refs" / "main").write_text("f" * 40)
    message = refused(entrypoint(image["env"], "--preflight-only"))
    assert f"holds '{'f' * 40}', the recipe needs {DRAFTER['revision']}" in message


def test_no_spec_variant_does_not_need_the_drafter(image: dict[str, Any]) -> None:
    shutil.rmtree(image["cache"] / "models--incoai--Qwen3.8-27B-DFlash2")
    assert "missing weights" in refused(entrypoint(image["env"], "--preflight-only"))
    done = entrypoint(image["env"], "--preflight-only", "--variant", "no-spec")
    assert done.returncode == 0, done.stderr


def test_refuses_an_unpatched_engine(image: dict[str, Any], engines: dict[str, Path]) -> None:
    env = {
        **image["env"],
        "PYTHONPATH": image["env"]["PYTHONPATH"].replace(str(engines["patched"]), str(engines["stock"])),
    }
    message = refused(entrypoint(env, "--preflight-only"))
    assert "unpatched engine, refusing exact mode (--enable-deterministic-inference)" in message
    assert "sglang: " in message and "bitexact_patches.py is missing" in message
    assert "deep_gemm: " in message and "lacks the sm120 fence" in message


def test_refuses_an_unwritable_jit_cache(image: dict[str, Any]) -> None:
    blocker = image["tmp"] / "not-a-directory"
    blocker.write_text("")
    env = {**image["env"], "BITEXACT_JIT_CACHE": str(blocker / "jit")}
    assert "is not writable" in refused(entrypoint(env, "--preflight-only"))


def test_the_exec_line_is_accepted_by_the_real_launcher(capsys: pytest.CaptureFixture[str]) -> None:
    """What the entrypoint execs, given to the launcher's bitexact-server CLI with --print: accepted,
    and the argv ends with the serving flags that make the container reachable."""
    from exactlaunch import cli

    for variant in ("recipe", "no-spec", "forced-reject"):
        command = server_command(variant, "30000")
        assert cli.main([*command[1:], "--recipe", str(RECIPE_PATH), "--print"]) == 0
        printed = json.loads(capsys.readouterr().out)
        assert printed["variant"] == variant
        assert printed["argv"][-4:] == ["--host", "0.0.0.0", "--port", "30000"]
        assert ("--speculative-algorithm" in printed["argv"]) == RECIPE["variants"][variant]["speculative"]
