"""lab/upstream_eval's parts that run without the upstream snapshots: each assertion over derivations
as `nix derivation show` prints them (passing on the shape the fixed flake has, failing on the shape
81aebf1 had), and the evaluation-only pin set, which nix/lib must find complete (so that no output can
evaluate as a `*-needs-pins` stand-in). The evaluation itself is hand-run (docs/verification.md)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from lab.upstream_eval import assertions as check
from lab.upstream_eval import workspace
from lab.upstream_eval.nixcli import config

ROOT = Path(__file__).resolve().parents[2]

SITE = "lib/python3.12/site-packages"
VENV = "/nix/store/v-bitexact-server-venv"
OUT = "/1rz4g4znpzjwh1xymhjpm42vipw92pr73vdgl6xs1hycac8kf2n9"  # builtins.placeholder "out"


def drv(
    name: str, out: str, env: dict[str, Any] | None = None, inputs: list[str] | None = None
) -> dict[str, Any]:
    return {
        "name": name,
        "env": env or {},
        "outputs": {"out": {"path": out}},
        "inputDrvs": {p: {"outputs": ["out"]} for p in inputs or []},
    }


def wheel_closure(hooks: list[str], append: str = "") -> dict[str, Any]:
    """A server closure holding the two hooks and one wheel whose nativeBuildInputs are `hooks`."""
    paths = {
        "patchelf": "/nix/store/a-auto-patchelf-hook",
        "driver": "/nix/store/b-auto-add-driver-runpath-hook",
    }
    cudart_env = {"pname": "nvidia-cuda-runtime", "nativeBuildInputs": " ".join(paths[h] for h in hooks)}
    if append:
        cudart_env["appendRunpaths"] = append
    return {
        "/nix/store/p.drv": drv("auto-patchelf-hook", paths["patchelf"]),
        "/nix/store/d.drv": drv("auto-add-driver-runpath-hook", paths["driver"]),
        "/nix/store/c.drv": drv("nvidia-cuda-runtime-13.0.96", "/nix/store/c-cudart", cudart_env),
        "/nix/store/r.drv": drv(
            "nvidia-cuda-nvrtc-13.0.88", "/nix/store/r-nvrtc", {"pname": "nvidia-cuda-nvrtc"}
        ),
    }


def test_driver_runpath() -> None:
    assert check.driver_runpath(wheel_closure(["patchelf", "driver"]), ["nvidia-cuda-runtime"]).passed
    missing = check.driver_runpath(wheel_closure(["patchelf"]), ["nvidia-cuda-runtime"])
    assert not missing.passed and "no autoAddDriverRunpath" in missing.details[0]
    early = check.driver_runpath(wheel_closure(["driver", "patchelf"]), ["nvidia-cuda-runtime"])
    assert not early.passed and "before autoPatchelfHook" in early.details[0]
    absent = check.driver_runpath(wheel_closure(["patchelf", "driver"]), ["torch"])
    assert not absent.passed and "no derivation" in absent.details[0]


def test_dlopen_runpaths() -> None:
    audit = {
        "packages": {
            "nvidia-cuda-runtime": {
                "libraries": {
                    "nvidia/cu13/lib/x.so": {
                        "reached": {
                            "libnvrtc.so.13": [["nvidia-cuda-nvrtc", "nvidia/cu13/lib"]],
                            "libown.so.1": [["nvidia-cuda-runtime", "nvidia/cu13/lib"]],
                        }
                    }
                }
            }
        }
    }
    good = f"/nix/store/r-nvrtc/{SITE}/nvidia/cu13/lib {OUT}/{SITE}/nvidia/cu13/lib"
    assert check.dlopen_runpaths(wheel_closure(["patchelf"], good), audit, SITE, OUT).passed
    half = check.dlopen_runpaths(wheel_closure(["patchelf"], good.split()[0]), audit, SITE, OUT)
    assert not half.passed and half.details == [
        "nvidia-cuda-runtime: nvidia/cu13/lib/x.so dlopens libown.so.1, in none of its RUNPATH directories"
    ]


def test_image_tag() -> None:
    path = "/nix/store/sfm3ybgzi0yv1jhlmv30yglkw7gnncik-image-bitexact-sglang.json"
    tagged = {"imageName": "bitexact-sglang", "imageTag": "qwen3.8-27b-exact", "path": path}
    assert check.image_tagged(tagged).passed
    assert not check.image_tagged({**tagged, "imageTag": "sfm3ybgzi0yv1jhlmv30yglkw7gnncik"}).passed


def test_host_binaries_need_the_loader() -> None:
    execs = {"gpu.py": 'subprocess.run(["nvidia-smi", "--query-gpu=name"])'}
    assert not check.image_runs_no_host_binary_without_loader(execs, "mkdir -p $out/etc").passed
    assert check.image_runs_no_host_binary_without_loader(
        execs, "ln -s x $out/lib64/ld-linux-x86-64.so.2"
    ).passed
    assert check.image_runs_no_host_binary_without_loader({"gpu.py": "import pynvml"}, "").passed
    # A docstring that says why nvidia-smi is not run is no use of it; a path to it is.
    said = {"gpu.py": '"""Identity through NVML; never "nvidia-smi" (a host binary)."""\nimport pynvml\n'}
    assert check.image_runs_no_host_binary_without_loader(said, "").passed
    path = {"gpu.py": 'SMI = "/usr/bin/nvidia-smi"\n'}
    assert not check.image_runs_no_host_binary_without_loader(path, "").passed


def test_seed_downloads_nothing() -> None:
    fetch = {
        "name": "hf-x",
        "outputs": {"out": {"path": "/nix/store/f-hf-x", "hash": "ab", "hashAlgo": "sha256"}},
    }
    bad = {"/s.drv": drv("seed-weights", "/nix/store/s", inputs=["/f.drv"]), "/f.drv": fetch}
    result = check.seed_downloads_nothing(bad, "/s.drv", ["/f.drv"])
    assert not result.passed and len(result.details) == 2
    good = {
        "/s.drv": drv("seed-weights", "/nix/store/s", inputs=["/sh.drv"]),
        "/sh.drv": drv("sh", "/nix/store/sh"),
    }
    assert check.seed_downloads_nothing(good, "/s.drv", ["/f.drv"]).passed


def test_nix2container_keeps_its_nixpkgs() -> None:
    own = {"locked": {"rev": "1cabc318c11299f07ca53e3cb719854682fe6eb3"}, "original": {"type": "github"}}
    ours = {"locked": {"rev": "e5bdc4a41d4c072fe1e3787eaa0320a384741d44"}, "original": {"type": "github"}}
    upstream = {"nodes": {"root": {"inputs": {"nixpkgs": "nixpkgs"}}, "nixpkgs": own}}
    lock = {
        "nodes": {"nix2container": {"inputs": {"nixpkgs": "nixpkgs_2"}}, "nixpkgs": ours, "nixpkgs_2": own}
    }
    assert check.nix2container_keeps_its_nixpkgs(lock, upstream).passed
    followed = {"nodes": {**lock["nodes"], "nix2container": {"inputs": {"nixpkgs": ["nixpkgs"]}}}}
    assert not check.nix2container_keeps_its_nixpkgs(followed, upstream).passed
    other = {"nodes": {**lock["nodes"], "nix2container": {"inputs": {"nixpkgs": "nixpkgs"}}}}
    assert not check.nix2container_keeps_its_nixpkgs(other, upstream).passed


def test_gpu_checks_shape() -> None:
    """One run of the runner on the plan (asking for cuda), each check its step's verdict (asking for
    nothing), the wrappers on the venv's Python; each way to break it is a finding."""
    plan = "/nix/store/p-gpu-plan-qwen3.8-27b-exact.json"
    run_command = f"bitexact-gpu-checks run --plan {plan} --recipe /r --out $out/results"

    def closure(
        verdict_features: str = "",
        pythonpath: str = f"/nix/store/b-bitexact/{SITE}",
        run_features: str = "cuda",
        command: str = run_command,
        verdict: str = "bitexact-gpu-checks verdict /nix/store/r/results gpu-repeat",
    ) -> dict[str, Any]:
        return {
            "/v.drv": drv(
                "gpu-repeat",
                "/nix/store/v",
                {"requiredSystemFeatures": verdict_features, "buildCommand": verdict},
            ),
            "/r.drv": drv(
                "gpu-checks-run",
                "/nix/store/r",
                {"requiredSystemFeatures": run_features, "buildCommand": command},
            ),
            "/p.drv": drv("gpu-plan-qwen3.8-27b-exact.json", plan),
            "/b.drv": drv(
                "bitexact", "/nix/store/b", {"text": f"export PYTHONPATH={pythonpath}${{PYTHONPATH:+x}}"}
            ),
            "/g.drv": drv(
                "bitexact-gpu-checks",
                "/nix/store/g",
                {
                    "text": f"export PYTHONPATH=/nix/store/g-gpu-checks/{SITE}${{P}}\n"
                    f"exec {VENV}/bin/python -m gpuchecks"
                },
            ),
            "/k.drv": drv(
                "python",
                "/nix/store/k",
                {"text": f"export PYTHONPATH={VENV}/{SITE}:/nix/store/p-pytest/{SITE}"},
            ),
        }

    assert check.gpu_checks_shape({"gpu-repeat": closure()}, SITE).passed, check.gpu_checks_shape(
        {"gpu-repeat": closure()}, SITE
    ).details
    broken = {
        "the verdict asks for cuda": closure(verdict_features="cuda"),
        "the run does not": closure(run_features=""),
        "bitexact for another Python": closure(
            pythonpath="/nix/store/b-bitexact/lib/python3.13/site-packages"
        ),
        "the run is not the runner on the plan": closure(command="bitexact-gpu-checks run --recipe /r"),
        "the check is not the verdict of its step": closure(verdict="test -f /nix/store/r/status"),
    }
    for why, shape in broken.items():
        assert not check.gpu_checks_shape({"gpu-repeat": shape}, SITE).passed, why


def test_outputs_are_real() -> None:
    names = {"packages": {"server": "bitexact-server"}, "checks": {"gpu-repeat": "gpu-repeat"}}
    assert check.outputs_are_real(names, ["gpu-repeat"]).passed
    assert not check.outputs_are_real(names, ["gpu-repeat", "gpu-golden"]).passed
    stand_in = {**names, "packages": {"server": "server-needs-pins"}}
    assert not check.outputs_are_real(stand_in, ["gpu-repeat"]).passed


@pytest.mark.nix
@pytest.mark.skipif(shutil.which("nix") is None, reason="needs nix")
def test_the_evaluation_only_pin_set_is_complete(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What write_eval_pins writes is every pin nix/lib asks for (so every output evaluates for real),
    SGLang's placeholder source is in the store under the narHash pinned, and nothing lands in the
    repository's own nix/pins/."""
    flake = tmp_path / "flake"
    for part in ("nix", "pkgs/server-env", "pkgs/weights"):
        shutil.copytree(ROOT / part, flake / part, ignore=shutil.ignore_patterns("manifests"))
    for stale in ("sglang-cargo.json", "sglang-cargo-locks", "wheel-stubs.json"):
        target = flake / "nix" / "pins" / stale
        shutil.rmtree(target) if target.is_dir() else target.unlink(missing_ok=True)
    before = sorted(p.relative_to(ROOT) for p in (ROOT / "nix" / "pins").rglob("*"))
    monkeypatch.setenv("NIX_CONFIG", config())
    workspace.write_eval_pins(["nix"], flake, tmp_path)
    assert sorted(p.relative_to(ROOT) for p in (ROOT / "nix" / "pins").rglob("*")) == before
    recipe = json.loads((flake / "nix" / "recipes" / "qwen3.8-27b-exact.json").read_text())
    expr = (
        f"(import {flake}/nix/lib).pins.missing {{ pinsDir = {flake}/nix/pins; "
        f'manifestsDir = {flake}/pkgs/weights/manifests; wheelStubs = [ "cuda-tile" ]; '
        f'repos = [ "{recipe["model"]["repo"]}" "{recipe["drafter"]["repo"]}" ]; }}'
    )
    done = subprocess.run(
        ["nix-instantiate", "--eval", "--strict", "--json", "--expr", expr], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []
    pin = json.loads((flake / "nix" / "pins" / "sglang-src.json").read_text())
    path = subprocess.run(
        ["nix", "store", "add-path", "--dry-run", "--name", "source", str(tmp_path / "sglang" / "source")],
        capture_output=True,
        text=True,
        env={"NIX_CONFIG": config(), "PATH": "/usr/bin:/bin"},
    )
    assert path.returncode == 0, path.stderr
    hashed = subprocess.run(
        ["nix", "hash", "path", str(tmp_path / "sglang" / "source")],
        capture_output=True,
        text=True,
        env={"NIX_CONFIG": config(), "PATH": "/usr/bin:/bin"},
    )
    assert hashed.stdout.strip() == pin["narHash"]
    assert "EVALUATION-ONLY" in (flake / "nix" / "pins" / "EVALUATION-ONLY.txt").read_text()
