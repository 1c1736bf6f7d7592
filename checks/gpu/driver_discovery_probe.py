"""Driver discovery, torch, triton and the NVML reader on a real GPU, with the driver where the loader
cannot find it by itself (issue 8 "First contact": the driver in a non-default directory, no ld.so.cache,
no host LD_LIBRARY_PATH).

Run on the lent H200 (torch 2.11 + CUDA 13, triton 3.6; no network, so nvidia-ml-py comes as a wheel
carried from here). From the repository root on the workstation:

    python3 -m pip download --no-deps --dest .whl nvidia-ml-py==13.610.43
    # then on the device machine, with carry [".whl"]: gpuhost and exactformats installed, then the probe
    /opt/torch/.venv/bin/python3 -m pip install --no-deps --no-build-isolation ./pkgs/formats ./pkgs/gpuhost
    /opt/torch/.venv/bin/python3 checks/gpu/driver_discovery_probe.py --out "$OUT" \\
        --wheel .whl/nvidia_ml_py-13.610.43-py3-none-any.whl

What it does, printing each step and writing $OUT/driver_discovery_probe.json:
1. gpuhost.driver.find_driver() on this machine, as the launcher would (LD_LIBRARY_PATH left out):
   where the driver is and why.
2. Copies the driver's files (libcuda.so*, libnvidia-*.so*) into a fresh directory no loader searches.
3. Runs child Pythons with `env -i` (no LD_LIBRARY_PATH from the host) under the dynamic loader invoked
   as `ld-linux-x86-64.so.2 --inhibit-cache python3 ...`: glibc then never reads /etc/ld.so.cache, in
   that process and in every library it dlopens (the flag is the loader's, process-wide). It still
   searches its built-in system directories (`ld.so --help` lists them; printed below), which is why the
   copy goes elsewhere. In that setting:
   a. without discovery: torch.cuda.is_available() must be False (libcudart's dlopen of libcuda.so.1
      finds nothing);
   b. with the environment discovery exports for the copy (BITEXACT_DRIVER_LIB=copy): True, a triton
      kernel compiles and runs (TRITON_LIBCUDA_PATH spares triton its /sbin/ldconfig call), and
      libcuda is mapped from the copy;
   c. with discovery's own answer for this machine (step 1): True as well;
   d. the NVML reader (gpuhost.nvml.read_cards) returns the card's identity: name "NVIDIA H200", PCI
      device id 0x2335, memory, compute capability 9.0, driver and CUDA versions, and the table slug.
Exit 0 when every expectation holds, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import exactformats
import gpuhost
from gpuhost.driver import DRIVER_FILE, OVERRIDE_VAR, driver_environment, find_driver

CHILD = r"""
import json, os, sys
names = ("LD_LIBRARY_PATH", "TRITON_LIBCUDA_PATH", "BITEXACT_DRIVER_LIB")
out = {"python": sys.executable, "prefix": sys.prefix, "env": {k: os.environ.get(k) for k in names}}
import torch
out["torch"] = torch.__version__
out["cuda_available"] = torch.cuda.is_available()
out["device_count"] = torch.cuda.device_count()
if out["cuda_available"]:
    props = torch.cuda.get_device_properties(0)
    out["device"] = {"name": props.name, "sm_count": props.multi_processor_count,
                     "memory_total": props.total_memory, "capability": f"{props.major}.{props.minor}"}
def run_triton():
    import triton, triton.language as tl
    @triton.jit
    def add(x, y, z, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(z + offs, tl.load(x + offs, mask=mask) + tl.load(y + offs, mask=mask), mask=mask)
    n = 100_000
    x = torch.randn(n, device="cuda"); y = torch.randn(n, device="cuda"); z = torch.empty_like(x)
    add[(triton.cdiv(n, 1024),)](x, y, z, n, BLOCK=1024)
    torch.cuda.synchronize()
    from triton.backends.nvidia import driver as nvdriver
    return {"version": triton.__version__, "equal": bool(torch.equal(z, x + y)),
            "libcuda_dirs": nvdriver.libcuda_dirs()}
if out["cuda_available"] and os.environ.get("PROBE_TRITON") == "1":
    try:
        out["triton"] = run_triton()
    except Exception as error:
        out["triton"] = {"error": f"{type(error).__name__}: {error}"}
out["libcuda_mapped"] = sorted({l.split()[-1] for l in open("/proc/self/maps") if "libcuda.so" in l})
if os.environ.get("PROBE_NVML") == "1":
    from gpuhost.driver import find_driver
    from gpuhost.nvml import read_cards
    from gpuhost.cards import slug_for
    try:
        out["nvml"] = [{**c.to_json(), "slug": slug_for(c)} for c in read_cards(find_driver())]
    except Exception as error:
        out["nvml_error"] = f"{type(error).__name__}: {error}"
print("RESULT " + json.dumps(out))
"""


def pt_interp(path: str) -> str:
    """The ELF program interpreter (PT_INTERP) of `path` (64-bit little-endian ELF)."""
    with open(path, "rb") as f:
        data = f.read(1 << 16)
    phoff = struct.unpack_from("<Q", data, 32)[0]
    phentsize, phnum = struct.unpack_from("<HH", data, 54)
    for i in range(phnum):
        base = phoff + i * phentsize
        p_type = struct.unpack_from("<I", data, base)[0]
        if p_type == 3:  # PT_INTERP
            offset = struct.unpack_from("<Q", data, base + 8)[0]
            size = struct.unpack_from("<Q", data, base + 32)[0]
            return data[offset : offset + size].rstrip(b"\0").decode()
    raise SystemExit(f"{path} has no PT_INTERP")


def child(
    loader: str, env: dict[str, str], log: list[str], name: str, *, triton: bool = False, nvml: bool = False
) -> dict[str, Any]:
    """The probe in `env -i` + `ld.so --inhibit-cache python3` (a file: triton.jit reads its source)."""
    probe = Path(tempfile.mkdtemp(prefix="probe-")) / "probe.py"
    probe.write_text(CHILD)
    full = {**env, "PROBE_TRITON": "1" if triton else "0", "PROBE_NVML": "1" if nvml else "0"}
    command = ["env", "-i", *[f"{k}={v}" for k, v in full.items()], loader, "--inhibit-cache", sys.executable]
    done = subprocess.run([*command, str(probe)], capture_output=True, text=True, timeout=900)
    log.append(f"== {name}: exit {done.returncode}\n$ {' '.join(command)} {probe}\n{done.stderr[-6000:]}")
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])
    return {"error": f"exit {done.returncode}", "stderr": done.stderr[-3000:]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")))
    parser.add_argument("--wheel", type=Path, help="nvidia-ml-py wheel to import pynvml from")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    log: list[str] = []
    report: dict[str, Any] = {"python": sys.executable}
    failures: list[str] = []

    loader = pt_interp(os.path.realpath(sys.executable))
    report["loader"] = loader
    report["loader_help"] = subprocess.run([loader, "--help"], capture_output=True, text=True).stdout

    host = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    found = find_driver(host)
    report["discovered"] = {**found.to_json(), "passed_over": list(found.passed_over)}
    print(f"discovery on this machine: {found.found_in} ({found.origin}), exported as {found.directory}")

    copy = Path(tempfile.mkdtemp(prefix="driver-copy-"))
    for name in sorted(os.listdir(found.found_in)):
        if DRIVER_FILE.match(name):
            shutil.copy2(found.found_in / name, copy / name, follow_symlinks=True)
    report["copy"] = {"directory": str(copy), "files": sorted(os.listdir(copy))}
    print(f"copied {len(report['copy']['files'])} driver files into {copy}")

    # The venv's packages by path too: a Python started through the loader may not see its venv, nor an
    # editable install's finder; so the folders that hold gpuhost and exactformats, wherever installed.
    import sysconfig

    pythonpath = [str(Path(m.__file__).resolve().parents[1]) for m in (gpuhost, exactformats)]
    pythonpath.append(sysconfig.get_paths()["purelib"])
    if args.wheel:
        pythonpath.append(str(args.wheel.resolve()))
    base = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": tempfile.mkdtemp(prefix="home-"),
        "TRITON_CACHE_DIR": tempfile.mkdtemp(prefix="triton-"),
        "PYTHONPATH": os.pathsep.join(pythonpath),
    }
    if "CUDA_VISIBLE_DEVICES" in os.environ:
        base["CUDA_VISIBLE_DEVICES"] = os.environ["CUDA_VISIBLE_DEVICES"]

    without = child(loader, base, log, "a. without discovery")
    report["a_without_discovery"] = without
    print(f"a. without discovery: cuda available = {without.get('cuda_available')}")
    if without.get("cuda_available") is not False:
        failures.append("a: torch saw CUDA without discovery (is the driver in a default loader directory?)")

    copy_env, _ = driver_environment(find_driver({OVERRIDE_VAR: str(copy)}), {})
    with_copy = child(
        loader, {**base, **copy_env, OVERRIDE_VAR: str(copy)}, log, "b. copy", triton=True, nvml=True
    )
    report["b_with_discovery_of_the_copy"] = with_copy
    print(f"b. with discovery ({OVERRIDE_VAR}={copy}): cuda available = {with_copy.get('cuda_available')}")
    print(f"   device: {with_copy.get('device')}")
    print(f"   triton: {with_copy.get('triton')}")
    print(f"   libcuda mapped from: {with_copy.get('libcuda_mapped')}")
    if with_copy.get("cuda_available") is not True:
        failures.append("b: torch did not see CUDA with discovery's environment")
    triton = with_copy.get("triton") or {}
    if not triton.get("equal") or triton.get("libcuda_dirs") != [str(copy)]:
        failures.append("b: the triton kernel did not run, or libcuda_dirs() is not the copy")
    mapped = with_copy.get("libcuda_mapped") or []
    if not mapped or not all(p.startswith(str(copy)) for p in mapped):
        failures.append("b: libcuda was not mapped from the copy")
    nvml = with_copy.get("nvml") or []
    print(f"d. NVML: {json.dumps(nvml, indent=2)} {with_copy.get('nvml_error', '')}")
    if not nvml or nvml[0]["name"] != "NVIDIA H200" or nvml[0]["compute_capability"] != "9.0":
        failures.append("d: the NVML reader did not return the H200's identity")

    own_env, _ = driver_environment(found, {})
    own = child(loader, {**base, **own_env}, log, "c. discovery's own answer")
    report["c_with_discovery_of_this_machine"] = own
    print(
        f"c. with discovery's answer for this machine ({found.directory}): cuda = {own.get('cuda_available')}"
    )
    if own.get("cuda_available") is not True:
        failures.append("c: torch did not see CUDA with discovery's answer for this machine")

    report["failures"] = failures
    (args.out / "driver_discovery_probe.json").write_text(json.dumps(report, indent=2) + "\n")
    (args.out / "driver_discovery_probe.log").write_text("\n".join(log) + "\n")
    print("FAILURES:\n  " + "\n  ".join(failures) if failures else "all expectations hold")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
