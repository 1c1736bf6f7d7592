"""The image entrypoint in a real container (docker, `--network none`), on a root filesystem laid out as
nix2container lays out the image: store paths only, no /lib64/ld-linux-x86-64.so.2, no ldconfig, no
ld.so.cache (nix_layout_rootfs.py). The NVIDIA container toolkit's mounts are reproduced: the driver's
libraries in /usr/lib64 (the compiled stand-ins for libcuda.so.1 and libnvidia-ml.so.1, read through the
real nvidia-ml-py) and a host glibc program at /usr/bin/nvidia-smi that records every run.

Shown here: exec'ing that host program fails in this layout (why the old preflight always refused);
the preflight passes without running it, also when the host's loader is mounted so that it could run;
the launcher, exec'd by the entrypoint, gives the server LD_LIBRARY_PATH and TRITON_LIBCUDA_PATH, with
which the server's process dlopens libcuda.so.1 by soname, and with which triton 3.7.1's own
`libcuda_dirs()` (its source read from the locked wheel) answers without /sbin/ldconfig, where it
fails without them.

Needs dockerd (a private one is started when none answers, as root; `.ci/run` installs Debian's
docker.io), patchelf and a C compiler; skipped without them unless BITEXACT_REQUIRE_DOCKER=1.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from checkhelpers.driver_standins import DRIVER_VERSION, H200, MAX_Q, install_driver, nvml_env
from checkhelpers.engine_trees import patched_tree
from checkhelpers.hfcache_support import RECIPE_PATH, REPO, materialize, nix_eval, nix_str, write_locked
from checkhelpers.nix_layout_rootfs import Rootfs
from checkhelpers.wheel_members import locked_member

pytestmark = [pytest.mark.docker, pytest.mark.network, pytest.mark.nix]

RECIPE = json.loads(RECIPE_PATH.read_text())
MODEL, DRAFTER = RECIPE["model"], RECIPE["drafter"]
IMAGE = "bitexact-nix-layout:test"
JIT = "/var/cache/bitexact"
SMI = "/usr/bin/nvidia-smi"
# A host glibc program where the toolkit mounts nvidia-smi: it records each run in /marker.
SMI_SOURCE = (
    "#include <stdio.h>\n"
    "int main(void) {\n"
    '  FILE *f = fopen("/marker/runs", "a");\n'
    '  if (f) { fputs("nvidia-smi ran\\n", f); fclose(f); }\n'
    '  puts("NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition, 12.0");\n'
    "  return 0;\n"
    "}\n"
)
# sglang.launch_server of the test's engine tree: what the server's process sees, as JSON on stdout.
LAUNCH_SERVER = '''
import ast, ctypes, json, os, subprocess, sys

def triton_libcuda_dirs():
    """triton 3.7.1's libcuda_dirs, its source from the locked wheel; `knobs.nvidia.libcuda_path` is
    TRITON_LIBCUDA_PATH from the environment (triton/knobs.py: env_opt_str, read with libtriton's
    getenv)."""
    class knobs:
        class nvidia:
            libcuda_path = os.environ.get("TRITON_LIBCUDA_PATH")
    namespace = {"os": os, "subprocess": subprocess, "knobs": knobs}
    exec(open(os.path.join(os.path.dirname(__file__), "triton_libcuda_dirs.py")).read(), namespace)
    try:
        return namespace["libcuda_dirs"]()
    except Exception as error:
        return f"{type(error).__name__}: {error}"

names = ("LD_LIBRARY_PATH", "TRITON_LIBCUDA_PATH")
out = {"argv": sys.argv[1:], "env": {k: os.environ.get(k) for k in names}}
try:
    cuda = ctypes.CDLL("libcuda.so.1")
    version = ctypes.c_int()
    cuda.cuDriverGetVersion(ctypes.byref(version))
    out["cuDriverGetVersion"] = version.value
    out["libcuda_mapped"] = sorted({l.split()[-1] for l in open("/proc/self/maps") if "libcuda" in l})
except OSError as error:
    out["libcuda_error"] = str(error)
out["libcuda_dirs"] = triton_libcuda_dirs()
os.environ.pop("TRITON_LIBCUDA_PATH", None)
out["libcuda_dirs_unset"] = triton_libcuda_dirs()
print(json.dumps(out))
'''


def locked_triton_libcuda_dirs() -> str:
    """The source of libcuda_dirs() in the uv.lock's triton wheel (test_triton_libcuda.py compares it
    with the H200's 3.6.0)."""
    version, source = locked_member("triton", "triton/backends/nvidia/driver.py")
    assert version == "3.7.1"
    (function,) = [
        n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == "libcuda_dirs"
    ]
    return (ast.get_source_segment(source, function) or "") + "\n"


def docker_cli() -> str | None:
    return shutil.which("docker")


@pytest.fixture(scope="module")
def docker() -> Iterator[list[str]]:
    """The docker command line: the default daemon when one answers, else a private dockerd (vfs
    storage, no bridge, no iptables) started here and stopped after the module."""
    required = os.environ.get("BITEXACT_REQUIRE_DOCKER") == "1"

    def unavailable(reason: str) -> None:
        (pytest.fail if required else pytest.skip)(f"{reason} (BITEXACT_REQUIRE_DOCKER=1 makes this fail)")

    for tool in ("patchelf", "cc", "ldd", "readelf"):
        if shutil.which(tool) is None:
            unavailable(f"{tool} is not installed")
    cli = docker_cli()
    if cli is None:
        unavailable("no docker command")
    assert cli is not None
    if subprocess.run([cli, "info"], capture_output=True).returncode == 0:
        yield [cli]
        return
    dockerd = shutil.which("dockerd")
    if dockerd is None or os.geteuid() != 0:
        unavailable("no docker daemon answers and none can be started (needs dockerd and root)")
    assert dockerd is not None
    # Short paths: containerd's socket lives under the exec root (a unix socket path has 108 bytes).
    home = Path(tempfile.mkdtemp(prefix="bxd-", dir="/tmp"))
    sock = f"unix://{home}/docker.sock"
    command = [
        dockerd,
        f"--data-root={home}/data",
        f"--exec-root={home}/exec",
        f"--pidfile={home}/docker.pid",
        f"--host={sock}",
        "--storage-driver=vfs",
        "--iptables=false",
        "--ip6tables=false",
        "--bridge=none",
    ]
    log = open(home / "dockerd.log", "w")
    daemon = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        for _ in range(120):
            if subprocess.run([cli, "-H", sock, "info"], capture_output=True).returncode == 0:
                break
            if daemon.poll() is not None:
                break
            time.sleep(0.5)
        else:
            daemon.poll()
        if subprocess.run([cli, "-H", sock, "info"], capture_output=True).returncode != 0:
            unavailable(f"dockerd did not start: {(home / 'dockerd.log').read_text()[-1500:]}")
        yield [cli, "-H", sock]
    finally:
        daemon.terminate()
        try:
            daemon.wait(timeout=60)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()
        log.close()
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="module")
def image(docker: list[str], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The Nix-layout image with the entrypoint, the launcher, gpuhost, the real nvidia-ml-py, a hub
    cache from nix/lib/hf-cache.nix's plan, a patched engine tree; and the toolkit's mounts."""
    tmp = tmp_path_factory.mktemp("image")
    rootfs = Rootfs(tmp / "rootfs")
    rootfs.add_python()
    import pynvml

    site = rootfs.inside(rootfs.site_packages)
    shutil.copy(pynvml.__file__, site / "pynvml.py")
    # the launcher and the packages it depends on, as the image's Python holds them
    for package, project in (("exactlaunch", "server"), ("gpuhost", "gpuhost"), ("exactformats", "formats")):
        shutil.copytree(REPO / "pkgs" / project / "src" / package, site / package)
    engine = patched_tree(tmp / "engine")
    (engine / "sglang" / "launch_server.py").write_text(LAUNCH_SERVER)
    (engine / "sglang" / "triton_libcuda_dirs.py").write_text(locked_triton_libcuda_dirs())
    shutil.copytree(engine, site, dirs_exist_ok=True)

    # The weights: a hub cache laid out by the Nix plan, its files copied into a store path.
    locked = write_locked(tmp, [(MODEL, {"config.json": b"{}"}), (DRAFTER, {"config.json": b"{}"})])
    reads = " ".join(
        f"(hf.readManifest {{ manifestsDir = /. + {nix_str(str(locked['manifests']))}; "
        f"repo = {nix_str(e['repo'])}; revision = {nix_str(e['revision'])}; }})"
        for e in (MODEL, DRAFTER)
    )
    plan = nix_eval(
        f"let hf = import ./nix/lib/hf-cache.nix; ms = [ {reads} ]; in "
        "{ layout = hf.cacheLayout ms; specs = builtins.concatMap hf.fetchSpecs ms; "
        "completeness = hf.completenessSpec ms; }"
    )
    hub = tmp / "hub"
    materialize(
        plan["layout"],
        {s["name"]: locked["files"] / s["repo"].replace("/", "--") / s["path"] for s in plan["specs"]},
        hub,
    )
    hub_store = rootfs.add_tree("hf-hub-cache", {".": hub})
    spec_store = rootfs.add_tree(
        "hf-weights-completeness", {"weights.json": json.dumps(plan["completeness"])}
    )
    recipe_store = rootfs.add_tree("recipe", {RECIPE_PATH.name: RECIPE_PATH})

    entrypoint_store = rootfs.add_tree(
        "bitexact-entrypoint", {"lib/image_entrypoint": REPO / "images/entrypoint/src/image_entrypoint"}
    )
    entrypoint = rootfs.add_script(
        entrypoint_store,
        "bitexact-entrypoint",
        # what makeWrapper writes in images/image.nix: the store's lib before PYTHONPATH, then `-m`
        f"import os, sys\nlib = {entrypoint_store + '/lib'!r}\n"
        "os.environ['PYTHONPATH'] = os.pathsep.join(filter(None, [lib, os.environ.get('PYTHONPATH')]))\n"
        f"os.execv({rootfs.python!r}, [{rootfs.python!r}, '-m', 'image_entrypoint.main', *sys.argv[1:]])\n",
    )
    server_store = rootfs.add_tree("bitexact-server", {})
    rootfs.add_script(
        server_store, "bitexact-server", "import sys\nfrom exactlaunch.cli import main\nsys.exit(main())\n"
    )

    for forbidden in ("lib64", "usr", "bin", "sbin", "etc/ld.so.cache", "etc/debian_version"):
        assert not rootfs.inside("/" + forbidden).exists(), forbidden
    subprocess.run(
        [*docker, "import", "-", IMAGE], input=rootfs.tar(writable=(JIT,)), capture_output=True, check=True
    )

    driver = install_driver(tmp / "driver")
    smi = tmp / "nvidia-smi"
    (tmp / "smi.c").write_text(SMI_SOURCE)
    subprocess.run(["cc", "-O1", "-o", str(smi), str(tmp / "smi.c")], check=True)
    interp = subprocess.run(["readelf", "-l", str(smi)], capture_output=True, text=True, check=True).stdout
    assert "[Requesting program interpreter: /lib64/ld-linux-x86-64.so.2]" in interp
    env = {
        "PATH": f"{entrypoint_store}/bin:{server_store}/bin",
        "NVIDIA_VISIBLE_DEVICES": "all",
        "NVIDIA_DRIVER_CAPABILITIES": "compute,utility",
        "BITEXACT_RECIPE": f"{recipe_store}/{RECIPE_PATH.name}",
        "BITEXACT_JIT_CACHE": JIT,
        "XDG_CACHE_HOME": JIT,
        "HOME": f"{JIT}/home",
        "TMPDIR": "/tmp",
        "BITEXACT_HF_HUB_CACHE": hub_store,
        "BITEXACT_WEIGHTS_SPEC": f"{spec_store}/weights.json",
    }
    yield {
        "docker": docker,
        "entrypoint": entrypoint,
        "python": rootfs.python,
        "env": env,
        "driver": driver,
        "smi": smi,
    }
    subprocess.run([*docker, "rmi", "-f", IMAGE], capture_output=True)


def run(
    image: dict[str, Any],
    marker: Path,
    command: list[str],
    *,
    env: dict[str, str] | None = None,
    loader: bool = False,
) -> subprocess.CompletedProcess[str]:
    """`command` in a fresh container with the toolkit's mounts: the driver in /usr/lib64, the host
    program at /usr/bin/nvidia-smi; `loader` also mounts this host's loader and libraries where a
    host glibc program looks for them."""
    marker.mkdir(exist_ok=True)
    marker.chmod(0o777)
    mounts = [
        f"--volume={image['driver']}:/usr/lib64:ro",
        f"--volume={image['smi']}:{SMI}:ro",
        f"--volume={marker}:/marker",
    ]
    if loader:
        mounts += ["--volume=/lib64:/lib64:ro", "--volume=/lib/x86_64-linux-gnu:/lib/x86_64-linux-gnu:ro"]
    variables = [f"--env={k}={v}" for k, v in {**image["env"], **nvml_env(MAX_Q), **(env or {})}.items()]
    return subprocess.run(
        [
            *image["docker"],
            "run",
            "--rm",
            "--network=none",
            "--user=1000:1000",
            *mounts,
            *variables,
            IMAGE,
            *command,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_host_program_cannot_run_in_a_nix_layout(image: dict[str, Any], tmp_path: Path) -> None:
    """What the toolkit mounts as nvidia-smi needs /lib64/ld-linux-x86-64.so.2: exec fails with ENOENT,
    the failure that made the old preflight refuse every start. With the loader mounted it runs."""
    probe = (
        f"import subprocess\ntry:\n    subprocess.run([{SMI!r}])\nexcept OSError as e:\n    print(e.errno)\n"
    )
    done = run(image, tmp_path / "m1", [image["python"], "-c", probe])
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "2"  # ENOENT
    ran = run(image, tmp_path / "m2", [SMI], loader=True)
    assert ran.returncode == 0, ran.stderr
    assert (tmp_path / "m2" / "runs").read_text() == "nvidia-smi ran\n"


@pytest.mark.parametrize(
    ("loader", "usr_bin"),
    [(False, False), (False, True), (True, True)],
    ids=["as-in-the-image", "usr-bin-on-path", "host-loader-mounted"],
)
def test_preflight_passes_without_running_a_host_binary(
    image: dict[str, Any], tmp_path: Path, loader: bool, usr_bin: bool
) -> None:
    """Also with /usr/bin on PATH (as the image had it before), where the old preflight found the
    toolkit's nvidia-smi and failed to exec it, and with the host loader there, where it could run."""
    env = {"PATH": image["env"]["PATH"] + ":/usr/bin:/bin"} if usr_bin else {}
    done = run(image, tmp_path / "marker", [image["entrypoint"], "--preflight-only"], env=env, loader=loader)
    assert done.returncode == 0, done.stderr
    assert "bitexact-entrypoint: preflight passed" in done.stderr
    assert not (tmp_path / "marker" / "runs").exists(), "the preflight ran nvidia-smi"


def test_preflight_refuses_another_card_through_nvml(image: dict[str, Any], tmp_path: Path) -> None:
    done = run(image, tmp_path / "marker", [image["entrypoint"], "--preflight-only"], env=nvml_env(H200))
    assert done.returncode == 2
    assert "sees NVIDIA H200 (PCI 10de:2335, 143771 MiB, compute capability 9.0), slug h200" in done.stderr
    assert "its bits will not match" in done.stderr
    assert not (tmp_path / "marker" / "runs").exists()


def test_the_server_starts_with_the_driver_on_its_path(image: dict[str, Any], tmp_path: Path) -> None:
    """entrypoint -> bitexact-server (exactlaunch) -> python -m sglang.launch_server (the test tree's,
    which reports what it sees): libcuda.so.1 by soname from the toolkit's /usr/lib64, and triton's
    libcuda_dirs() answered from TRITON_LIBCUDA_PATH, without /sbin/ldconfig."""
    done = run(image, tmp_path / "marker", [image["entrypoint"], "--port", "30123"])
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["argv"][-4:] == ["--host", "0.0.0.0", "--port", "30123"]
    assert seen["env"] == {"LD_LIBRARY_PATH": "/usr/lib64", "TRITON_LIBCUDA_PATH": "/usr/lib64"}
    assert seen["cuDriverGetVersion"] == 13000
    assert seen["libcuda_mapped"] == [f"/usr/lib64/libcuda.so.{DRIVER_VERSION}"]
    assert seen["libcuda_dirs"] == ["/usr/lib64"]
    assert (
        seen["libcuda_dirs_unset"]
        == "FileNotFoundError: [Errno 2] No such file or directory: '/sbin/ldconfig'"
    )
    assert not (tmp_path / "marker" / "runs").exists()
