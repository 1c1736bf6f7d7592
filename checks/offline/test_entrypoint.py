"""The image entrypoint's preflight, run as the image runs it (a subprocess with the image's environment
variables): the NVIDIA driver laid out as the container toolkit mounts it, with compiled stand-ins for
libcuda.so.1 and libnvidia-ml.so.1 (driver_standins.py) read through the real nvidia-ml-py, a hub cache
laid out by nix/lib/hf-cache.nix's plan, and the real sglang 0.5.20 / sgl-deep-gemm trees, stock and
patched. An `nvidia-smi` first on PATH records any exec: the preflight must run no host binary."""

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
from checkhelpers.driver_standins import H200, MAX_Q, SERVER, WORKSTATION, identity, install_driver, nvml_env
from checkhelpers.engine_trees import patched_tree, stock_tree
from checkhelpers.hfcache_support import RECIPE_PATH, materialize, nix_eval, nix_str, write_locked
from image_entrypoint.checks import PreflightError
from image_entrypoint.gpu import Card, check_card
from image_entrypoint.main import repos_named, server_command

RECIPE = json.loads(RECIPE_PATH.read_text())
MODEL, DRAFTER = RECIPE["model"], RECIPE["drafter"]
CARD = Card(slug=RECIPE["card"]["slug"], name=RECIPE["card"]["name"])
# Tests using these fixtures get the markers (checkhelpers.markers).
FIXTURE_NEEDS = {"engines": ("network",), "image": ("nix",)}


def exec_recorder(directory: Path, marker: Path) -> Path:
    """An `nvidia-smi` that records that it was run (where the toolkit puts one on PATH)."""
    exe = directory / "nvidia-smi"
    exe.write_text(f'#!/bin/sh\necho "$@" >> {marker}\nexit 0\n')
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return exe


def test_card_check() -> None:
    assert check_card([identity(MAX_Q)], CARD, allow_other=False) == []
    assert check_card([identity(MAX_Q), identity(MAX_Q)], CARD, allow_other=False) == []
    with pytest.raises(PreflightError, match=r"wrong card: .* sees NVIDIA H200 \(PCI 10de:2335, 143771 MiB"):
        check_card([identity(H200)], CARD, allow_other=False)
    with pytest.raises(PreflightError, match="wrong card"):  # one wrong card among several is enough
        check_card([identity(MAX_Q), identity(H200)], CARD, allow_other=False)
    (warning,) = check_card([identity(H200)], CARD, allow_other=True)
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


@pytest.fixture(scope="module")
def engines(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Site-packages roots the preflight accepts (`patched`) and refuses (`stock`): engine_trees.py."""
    base = tmp_path_factory.mktemp("engines")
    return {"patched": patched_tree(base / "patched"), "stock": stock_tree(base / "stock")}


@pytest.fixture(scope="module")
def driver_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return install_driver(tmp_path_factory.mktemp("driver-build"))


@pytest.fixture()
def image(tmp_path: Path, engines: dict[str, Path], driver_build: Path) -> dict[str, Any]:
    """The image's environment for the preflight: recipe, hub cache and spec from the Nix plan, JIT
    cache, the driver's stand-ins reporting the recipe's card (BITEXACT_DRIVER_LIB points at them: the
    container toolkit's /usr/lib64 is outside a test's reach), an exec-recording nvidia-smi on PATH."""
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
    execs = tmp_path / "nvidia-smi-was-run"
    exec_recorder(bin_dir, execs)
    env = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        # the stand-in SGLang tree under test; the entrypoint and the launcher are installed (sys.executable)
        "PYTHONPATH": str(engines["patched"]),
        "BITEXACT_RECIPE": str(RECIPE_PATH),
        "BITEXACT_HF_HUB_CACHE": str(cache),
        "BITEXACT_WEIGHTS_SPEC": str(spec),
        "BITEXACT_JIT_CACHE": str(tmp_path / "jit"),
        "BITEXACT_DRIVER_LIB": str(install_driver(tmp_path / "driver", built=driver_build)),
        **nvml_env(MAX_Q),
    }
    return {"env": env, "cache": cache, "bin": bin_dir, "tmp": tmp_path, "execs": execs}


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
    assert not image["execs"].exists(), "the preflight ran nvidia-smi"


def test_execs_the_launcher_reachable_from_outside(image: dict[str, Any]) -> None:
    server = image["bin"] / "bitexact-server"
    server.write_text('#!/bin/sh\necho "launched: $*"\n')
    server.chmod(0o755)
    done = entrypoint(image["env"], "--port", "8123", "--variant", "no-spec")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "launched: --variant no-spec --host 0.0.0.0 --port 8123\n"


def test_refuses_a_wrong_card_and_says_whether_its_bits_would_match(image: dict[str, Any]) -> None:
    h200 = {**image["env"], **nvml_env(H200)}
    message = refused(entrypoint(h200, "--preflight-only"))
    assert (
        "wrong card: the recipe is for NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition "
        "(slug rtx-pro-6000-blackwell)" in message
    )
    assert "sees NVIDIA H200 (PCI 10de:2335, 143771 MiB, compute capability 9.0), slug h200" in message
    assert "its bits will not match: another architecture" in message
    for sibling in (WORKSTATION, SERVER):
        message = refused(entrypoint({**image["env"], **nvml_env(sibling)}, "--preflight-only"))
        assert f"sees {sibling.name}" in message and "they may match, unproven" in message
    allowed = entrypoint({**h200, "BITEXACT_ALLOW_OTHER_CARD": "1"}, "--preflight-only")
    assert allowed.returncode == 0 and "warning: wrong card" in allowed.stderr
    assert not image["execs"].exists(), "the preflight ran nvidia-smi"


def test_refuses_without_a_gpu(image: dict[str, Any]) -> None:
    no_card = {**image["env"], "STANDIN_NVML_DEVICES": ""}
    message = refused(entrypoint(no_card, "--preflight-only"))
    assert "no GPU visible: NVML" in message and "lists no card" in message and "--gpus all" in message
    unreachable = {**image["env"], "STANDIN_NVML_INIT": "9"}
    assert "cannot reach the driver: Driver Not Loaded" in refused(
        entrypoint(unreachable, "--preflight-only")
    )
    gone = {**image["env"], "BITEXACT_DRIVER_LIB": str(image["tmp"] / "absent")}
    message = refused(entrypoint(gone, "--preflight-only"))
    assert "no GPU visible: no NVIDIA driver library libcuda.so.1 in BITEXACT_DRIVER_LIB=" in message
    no_nvml = install_driver(image["tmp"] / "no-nvml", nvml=False)
    message = refused(entrypoint({**image["env"], "BITEXACT_DRIVER_LIB": str(no_nvml)}, "--preflight-only"))
    assert "no libnvidia-ml.so.1" in message and "NVIDIA_DRIVER_CAPABILITIES" in message
    assert not image["execs"].exists(), "the preflight ran nvidia-smi"


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
