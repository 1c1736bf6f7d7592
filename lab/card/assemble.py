"""Assemble a runnable SGLang 0.5.20 on a GPU host with no network, from wheels brought along (issue 10).

Two steps:

    # on a machine with PyPI (here): the wheels, cp312 / manylinux x86_64, into DIR
    python -m lab.card.assemble fetch --dest DIR
    # on the GPU host (torch, triton, transformers already installed there), from the repository root:
    python -m lab.card.assemble build --wheels DIR [DIR2 ...] --work WORK
    # a further tree beside them: a rebuild of `patched`, or the series less one patch (a changed kernel)
    python -m lab.card.assemble tree --wheels DIR [DIR2 ...] --work WORK --name NAME [--without 0003]

`build` makes under WORK:
- `patched/`: the sglang 0.5.20 wheel unpacked, our series applied (`patch -p2 --fuzz=0`, name order),
  and the preflight's content manifest written (exactlaunch.manifest);
- `stock/`: the same wheel as released, the control;
- `deps/`: everything else (`pip install --no-index --no-deps --target`), and this checkout's launcher,
  bitexact and runner (pkgs/server, pkgs/bitexact, pkgs/gpu-checks and the packages they share,
  pkgs/formats and pkgs/gpuhost: copied again on every build), at
  uv.lock's versions where
  the host's torch allows: sglang-kernel is 0.4.5, not the lock's 0.4.7, because 0.4.7's
  `sm90/common_ops.abi3.so` is built for torch 2.13 and does not load on the host's torch 2.11 (0.4.5
  is the release SGLang 0.5.17 paired with torch 2.11); only its Python files and `sm90/` travel
  (`fetch` slims the 383 MB wheel). sgl-deep-gemm 0.2.0 gets our fence (the launcher's preflight
  reads its header).
Then it imports the server's modules under each tree and prints every module that is missing.

Packages the GPU host already has (torch, triton, transformers, numpy, ...) are not fetched: HOST_HAS
lists what the lent H200's image holds (its package list), and `build` reports their versions.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tomllib
import zipfile
from collections.abc import Callable
from pathlib import Path

from lab.card import runner_args as ra  # (the runners' strict command lines)
from lab.card.product import install_product

REPO = Path(__file__).resolve().parents[2]
LOCK = REPO / "pkgs" / "server-env" / "uv.lock"
SGLANG = ("sglang", "0.5.20")
# The torch-2.11 pairing (sglang 0.5.17's pins), see the module docstring.
SGLANG_KERNEL = ("sglang-kernel", "0.4.5")
SLIM_KERNEL = "sglang_kernel-0.4.5-sm90-slim.zip"
# What SGLang 0.5.20's server imports that the GPU host lacks, found by importing the server's modules
# (http_server, scheduler, tokenizer/detokenizer managers, model runner, qwen3_5_text, dflash, the DFLASH
# worker, the triton and hybrid linear-attention backends, the loader, batch_invariant_ops) on a copy
# of the host's package set. Versions come from uv.lock.
FROM_LOCK = (
    "annotated-types",
    "apache-tvm-ffi",
    "cffi",
    "compressed-tensors",
    "dill",
    "distro",
    "fastapi",
    "flashinfer-python",
    "gguf",
    "httpx2",
    "ipython",
    "jsonschema",
    "jsonschema-specifications",
    "loguru",
    "msgspec",
    "nvidia-ml-py",
    "openai",
    "orjson",
    "partial-json-parser",
    "pybase64",
    "pycparser",
    "pydantic",
    "pydantic-core",
    "python-multipart",
    "pyzmq",
    "referencing",
    "rpds-py",
    "setproctitle",
    "sgl-deep-gemm",
    "sniffio",
    "soundfile",
    "starlette",
    "traitlets",
    "typing-inspection",
    "uvicorn",
    "xgrammar",
)
# What the runner's kernel phase needs on a host whose Python lacks it: pytest (the offline suite's version).
HOST_TOOLS = ("pytest==8.4.2", "pluggy==1.6.0", "iniconfig==2.1.0")
# Wheels that carry build-time files nothing imports: the suffixes dropped by `fetch`.
SLIM = {"xgrammar-*.whl": (".a",)}
PLATFORMS = [f"manylinux_2_{n}_x86_64" for n in range(17, 40)] + ["manylinux2014_x86_64", "manylinux1_x86_64"]
# The modules a serving process imports on the way to our batteries.
SERVER_MODULES = (
    "sglang.launch_server",
    "sglang.srt.entrypoints.http_server",
    "sglang.srt.managers.scheduler",
    "sglang.srt.managers.tokenizer_manager",
    "sglang.srt.managers.detokenizer_manager",
    "sglang.srt.model_executor.model_runner",
    "sglang.srt.models.qwen3_5_text",
    "sglang.srt.models.dflash",
    "sglang.srt.speculative.dflash_worker_v2",
    "sglang.srt.layers.attention.triton_backend",
    "sglang.srt.layers.attention.hybrid_linear_attn_backend",
    "sglang.srt.model_loader.loader",
    "sglang.srt.batch_invariant_ops.batch_invariant_ops",
    "sgl_kernel",
)


def lock_versions() -> dict[str, str]:
    """{normalised name: version} of uv.lock's packages (names as pinlock normalises them, PEP 503)."""
    from pinlock.stubs import normalize

    lock = tomllib.loads(LOCK.read_text())
    return {normalize(p["name"]): p["version"] for p in lock["package"]}


def pip_download(spec: str, dest: Path) -> None:
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:"]
    cmd += [
        "--python-version",
        "3.12",
        "--implementation",
        "cp",
        "--abi",
        "cp312",
        "--abi",
        "abi3",
        "--abi",
        "none",
    ]
    for platform in PLATFORMS + ["any"]:
        cmd += ["--platform", platform]
    subprocess.run([*cmd, "--dest", str(dest), spec], check=True)


def copy_wheel(source: Path, out: Path, keep: Callable[[str], bool]) -> Path:
    """Write the members of wheel `source` whose names `keep` accepts to `out` (which may be `source`
    itself), with the RECORD lines of the members left out removed; RECORD is always kept."""
    members = []
    with zipfile.ZipFile(source) as archive:
        for info in archive.infolist():
            if keep(info.filename) or info.filename.endswith(".dist-info/RECORD"):
                members.append((info, archive.read(info)))
    kept = {info.filename for info, _ in members}
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for info, body in members:
            if info.filename.endswith(".dist-info/RECORD"):
                lines = body.decode().splitlines(keepends=True)
                body = "".join(line for line in lines if line.split(",")[0] in kept).encode()
            target.writestr(info, body)
    return out


def keep_for_hopper(name: str) -> bool:
    """What Hopper needs from sglang-kernel: its Python files and sm90/ (the 1.1 GB FA3 flash_ops and the
    sm100 build stay behind; the Triton attention backend uses neither)."""
    python = name.endswith(".py") and name.startswith(("sgl_kernel/", "triton_kernels/"))
    return python or name.startswith(("sgl_kernel/sm90/", f"sglang_kernel-{SGLANG_KERNEL[1]}.dist-info/"))


def fetch(dest: Path) -> int:
    dest.mkdir(parents=True, exist_ok=True)
    versions = lock_versions()
    pip_download("==".join(SGLANG), dest)
    for name in FROM_LOCK:
        pip_download(f"{name}=={versions[name]}", dest)
    for spec in HOST_TOOLS:
        pip_download(spec, dest)
    for pattern, drop in SLIM.items():
        # build-time payload, e.g. xgrammar's 65 MB static library beside the bindings it was linked into
        wheel = find_one([dest], pattern)
        copy_wheel(wheel, wheel, lambda name, drop=drop: not name.endswith(drop))
    staging = dest / "staging"
    staging.mkdir(exist_ok=True)
    pip_download("==".join(SGLANG_KERNEL), staging)
    (full,) = staging.glob("sglang_kernel-*.whl")
    copy_wheel(full, dest / SLIM_KERNEL, keep_for_hopper)
    full.unlink()
    staging.rmdir()
    total = sum(p.stat().st_size for p in dest.iterdir())
    print(f"fetched {len(list(dest.iterdir()))} files, {total / 2**20:.1f} MiB, into {dest}")
    return 0


def find_one(dirs: list[Path], pattern: str) -> Path:
    found = sorted(p for d in dirs for p in d.glob(pattern))
    if not found:
        raise SystemExit(
            f"assemble: no {pattern} in {', '.join(map(str, dirs))}; run `assemble.py fetch` first"
        )
    return found[0]


def unpack(wheel: Path, target: Path) -> None:
    target.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(target)


def apply(patch: Path, root: Path, strip: int) -> None:
    cmd = [
        "patch",
        f"-p{strip}",
        "--fuzz=0",
        "--batch",
        "--forward",
        "--no-backup-if-mismatch",
        "-i",
        str(patch.resolve()),
    ]
    done = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"assemble: {patch.name} does not apply to {root}:\n{done.stdout}{done.stderr}")


def patched_tree(wheel_dirs: list[Path], dest: Path, without: list[str]) -> int:
    """Unpack the wheel into `dest` and apply the series less the patches named in `without` (by their
    number, e.g. 0003). The whole series gets the preflight's manifest; a tree missing a patch gets none,
    so the launcher refuses it and the runners start it as they start the stock tree."""
    if dest.exists():
        print(f"assemble: {dest} exists; remove it to build it again", file=sys.stderr)
        return 2
    series = sorted((REPO / "patches" / "sglang").glob("*.patch"))
    unknown = [n for n in without if not any(p.name.startswith(f"{n}-") for p in series)]
    if unknown:
        names = ", ".join(p.name for p in series)
        print(
            f"assemble: --without {', '.join(unknown)}: no such patch in the series ({names})",
            file=sys.stderr,
        )
        return 2
    kept = [p for p in series if not any(p.name.startswith(f"{n}-") for n in without)]
    unpack(find_one(wheel_dirs, "sglang-0.5.20-cp312-*.whl"), dest)
    for patch in kept:
        apply(patch, dest, 2)
    if not without:
        from exactlaunch import manifest

        manifest.write(dest, series)
    print(f"assemble: {dest}: {', '.join(p.name for p in kept)}")
    return 0


def missing_modules(work: Path, tree: str) -> list[str]:
    """Import the server's modules under `tree` in a fresh Python; the names that fail, with why."""
    probe = (
        "import importlib, json, sys\n"
        "bad = []\n"
        f"for m in {list(SERVER_MODULES)!r}:\n"
        "    try:\n"
        "        importlib.import_module(m)\n"
        "    except Exception as e:\n"
        "        bad.append(f'{m}: {type(e).__name__}: {e}'[:400])\n"
        "print(json.dumps(bad))\n"
    )
    # the SGLang tree under test and its deps folder (which holds this checkout's product: install_product)
    env = {"PYTHONPATH": f"{work / tree}:{work / 'deps'}"}
    import os

    done = subprocess.run(
        [sys.executable, "-c", probe], env={**os.environ, **env}, capture_output=True, text=True
    )
    if done.returncode != 0:
        return [f"probe crashed: {done.stderr[-2000:]}"]
    return json.loads(done.stdout.strip().splitlines()[-1])


def build(wheel_dirs: list[Path], work: Path) -> int:
    work.mkdir(parents=True, exist_ok=True)
    sglang_wheel = find_one(wheel_dirs, "sglang-0.5.20-cp312-*.whl")
    for tree in ("patched", "stock"):
        if not (work / tree / "sglang").is_dir():
            unpack(sglang_wheel, work / tree)
    if not (work / "patched" / "sglang" / "srt" / "bitexact_manifest.json").exists():
        for patch in sorted((REPO / "patches" / "sglang").glob("*.patch")):
            apply(patch, work / "patched", 2)
        from exactlaunch import manifest

        manifest.write(work / "patched", sorted((REPO / "patches" / "sglang").glob("*.patch")))
    deps = work / "deps"
    installed = not (deps / ".complete").exists()
    if installed:
        wheels = sorted(
            p for d in wheel_dirs for p in d.glob("*.whl") if not p.name.startswith("sglang-0.5.20")
        )
        cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps", "--no-compile"]
        # --upgrade: what an earlier, incomplete try left is replaced, not kept (pip --target skips it)
        subprocess.run([*cmd, "--upgrade", "--target", str(deps), *map(str, wheels)], check=True)
        with zipfile.ZipFile(find_one(wheel_dirs, SLIM_KERNEL)) as archive:
            archive.extractall(deps)
        apply(REPO / "patches" / "deep-gemm" / "0001-sm120-fence.patch", deps, 1)
    install_product(deps)
    report: dict[str, object] = {}
    for tree in ("patched", "stock"):
        report[tree] = missing_modules(work, tree)
    host = {}
    for name in ("torch", "triton", "transformers", "tokenizers", "numpy", "safetensors", "huggingface_hub"):
        try:
            module = __import__(name)
            host[name] = getattr(module, "__version__", "?")
        except ImportError as error:
            host[name] = f"missing ({error})"
    report["host"] = host
    buf = io.StringIO()
    json.dump(report, buf, indent=1)
    (work / "assemble-report.json").write_text(buf.getvalue() + "\n")
    print(buf.getvalue())
    missing = [m for tree in ("patched", "stock") for m in report[tree]]  # type: ignore[union-attr]
    if missing:
        # no .complete: the runners refuse this work folder, and the next build installs the set again
        print(
            f"assemble: {len(missing)} module(s) do not import; see above. A wheel set may be missing: "
            f"the machine may have been given back between the stash calls (found: "
            f"{', '.join(str(d) for d in wheel_dirs)})",
            file=sys.stderr,
        )
        return 1
    if installed:
        (deps / ".complete").write_text("")  # only once every server module imports from it
    return 0


@ra.one_line("lab/card/assemble.py")
def main(argv: list[str] | None = None) -> int:
    parser = ra.strict_parser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="step", required=True)
    f = sub.add_parser("fetch", help="download the wheel set (needs PyPI)")
    f.add_argument("--dest", type=Path, required=True)
    b = sub.add_parser("build", help="assemble the trees on the GPU host (no network)")
    b.add_argument("--wheels", type=Path, nargs="+", required=True)
    b.add_argument("--work", type=Path, required=True)
    t = sub.add_parser(
        "tree", help="one more patched tree under WORK (a rebuild, or the series less a patch)"
    )
    t.add_argument("--wheels", type=Path, nargs="+", required=True)
    t.add_argument("--work", type=Path, required=True)
    t.add_argument("--name", type=ra.name, required=True, help="the tree's folder under WORK")
    t.add_argument("--without", action="append", default=[], help="a patch number to leave out (repeatable)")
    args = parser.parse_args(argv)
    if args.step == "fetch":
        return fetch(args.dest)
    if args.step == "tree":
        return patched_tree(args.wheels, args.work / args.name, args.without)
    return build(args.wheels, args.work)


if __name__ == "__main__":
    sys.exit(main())
