"""Evaluate the flake at one commit against the real uv2nix, pyproject.nix, build-system-pkgs and
nix2container, and nixpkgs (real, or here nixpkgs' lib with stand-in packages), with an evaluation-only
pin set; assert the properties in assertions.py; print a report.

    python3 -m lab.upstream_eval.evaluate --rev HEAD --report docs/evidence/upstream-eval-cpu-DATE/REV.txt

lab/upstream_eval/run.sh runs this with Nix 2.26 in a private store (docs/verification.md). Exit
status: 0 every assertion passed, 1 one failed, 2 the run itself could not be set up.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lab.upstream_eval import assertions as check
from lab.upstream_eval import workspace
from lab.upstream_eval.nixcli import SYSTEM, Nix, NixError, config

PY_SITE = "lib/python3.12/site-packages"  # the server env's interpreter (pkgs/server-env: python312)


def closure(drvs: dict[str, Any], top: str) -> dict[str, Any]:
    """The derivations `top` depends on (itself included), from a merged `nix derivation show -r`."""
    seen: dict[str, Any] = {}
    stack = [top]
    while stack:
        path = stack.pop()
        if path in seen or path not in drvs:
            continue
        seen[path] = drvs[path]
        stack.extend(drvs[path].get("inputDrvs", {}))
    return seen


def step(results: list[check.Result], name: str, fn: Any) -> None:
    """Run one assertion; a Nix failure while computing it fails that assertion, not the run."""
    try:
        results.append(fn())
    except NixError as error:
        results.append(check.Result(name, False, [str(error)]))
    except (KeyError, IndexError, StopIteration, TypeError, ValueError) as error:
        results.append(check.Result(name, False, [f"could not check it: {type(error).__name__}: {error}"]))


def evaluate(args: argparse.Namespace, scratch: Path, log: list[str]) -> list[check.Result]:
    nix_argv = shlex.split(args.nix)
    os.environ["NIX_CONFIG"] = config(ifd=True)
    version = subprocess.run(
        [*nix_argv, "--version"], capture_output=True, text=True, check=True
    ).stdout.strip()
    flake = scratch / "flake"
    if args.worktree:
        commit = workspace.copy_worktree(args.repo, flake)
    else:
        commit = workspace.export_flake(args.repo, args.rev, flake)
    locked = workspace.locked_revs(flake)
    sources = {}
    for name, mirror in workspace.MIRRORS.items():
        given = args.input.get(name, args.mirror / mirror)
        sources[name] = workspace.input_source(name, given, locked.get(name), scratch / "inputs" / name)
    if args.nixpkgs:
        nixpkgs = workspace.input_source(
            "nixpkgs", args.nixpkgs, locked.get("nixpkgs"), scratch / "inputs" / "nixpkgs"
        )
        nixpkgs_path, nixpkgs_note = nixpkgs.path, nixpkgs.describe() + " (real nixpkgs)"
    else:
        lib = workspace.input_source(
            "nixpkgs lib", args.input.get("nixpkgs-lib", args.mirror / workspace.NIXPKGS_LIB_MIRROR), None,
            scratch / "inputs" / "nixpkgs-lib",
        )  # fmt: skip
        nixpkgs_path = workspace.standin_nixpkgs(lib, scratch / "inputs" / "nixpkgs")
        nixpkgs_note = (
            f"nixpkgs: stand-in (lab/upstream_eval/standin-nixpkgs) over the real lib of {lib.describe()}"
        )
    pinned = workspace.write_eval_pins(nix_argv, flake, scratch)
    overrides = {name: s.path for name, s in sources.items()}
    overrides["nixpkgs"] = nixpkgs_path
    overrides["nix2container/nixpkgs"] = nixpkgs_path
    nix = Nix(nix_argv, flake, overrides)

    log += [
        f"flake: {args.repo} at {commit}",
        f"nix: {version}",
        *[s.describe() for s in sources.values()],
        nixpkgs_note,
        "pins: evaluation-only set written into the scratch copy ("
        + ", ".join(f"{k} {v}" for k, v in pinned.items())
        + ")",
        "",
    ]
    results: list[check.Result] = []

    started = time.monotonic()
    done = nix.flake_check(ifd=False)
    log.append(
        f"nix flake check --no-build (IFD off): exit {done.returncode} in {time.monotonic() - started:.0f}s"
    )
    error = str(NixError("nix flake check --no-build", done.stderr))
    if done.returncode != 0:
        # Every package's and check's derivation with IFD allowed (the placeholder source is in the
        # store, so nothing is built; `flake check --no-build` itself writes no derivation, so IFD
        # cannot work there): tells an import-from-derivation failure from any other.
        drvs = "builtins.mapAttrs (n: d: d.drvPath)"
        allowed = [
            nix.run(["eval", "--json", f"{nix.ref}#{o}.{SYSTEM}", "--apply", drvs], True)
            for o in ("packages", "checks")
        ]
        verdict = "evaluate" if all(a.returncode == 0 for a in allowed) else "fail too"
        log.append(
            f"with allow-import-from-derivation = true, every package's and check's derivation: {verdict}"
        )
        error += f"\n    with allow-import-from-derivation = true, every package and check would {verdict}"
    results.append(check.evaluates_without_ifd(done.returncode, error))

    recipe = json.loads((flake / "nix" / "recipes" / "qwen3.8-27b-exact.json").read_text())
    recipe_nix = "builtins.fromJSON " + json.dumps(json.dumps(recipe)).replace("${", "\\${")

    def names() -> check.Result:
        out = {
            "packages": nix.eval_json(f"packages.{SYSTEM}", "builtins.mapAttrs (n: p: p.name)"),
            "checks": nix.eval_json(f"checks.{SYSTEM}", "builtins.mapAttrs (n: c: c.name)"),
            "apps": nix.eval_json(f"apps.{SYSTEM}", "builtins.mapAttrs (n: a: a.program)"),
        }
        gpu = nix.eval_json("lib", f"lib: map (b: b.name) (lib.gpuBatteries.batteries ({recipe_nix}))")
        return check.outputs_are_real(out, [*gpu, "gpu-kernels"])

    step(results, "every output evaluates for real", names)

    # One `nix derivation show -r` over every output the report looks into.
    gpu_drvs: dict[str, str] = {}
    tops: dict[str, str] = {}
    merged: dict[str, Any] = {}
    try:
        checks_drvs = nix.eval_json(f"checks.{SYSTEM}", "builtins.mapAttrs (n: c: c.drvPath)")
        gpu_drvs = {n: p for n, p in checks_drvs.items() if n.startswith("gpu-")}
        for attr in ("server", "server-env", "image", "seed-weights"):
            tops[attr] = nix.eval_json(f"packages.{SYSTEM}.{attr}.drvPath")
        installables = [f"packages.{SYSTEM}.{a}" for a in tops] + [f"checks.{SYSTEM}.{n}" for n in gpu_drvs]
        started = time.monotonic()
        merged = nix.derivations(installables, recursive=True)
        log.append(
            f"nix derivation show -r on {', '.join(installables)}: {len(merged)} derivations "
            f"in {time.monotonic() - started:.0f}s"
        )
        if args.out:
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / "derivations.json").write_text(json.dumps(merged, indent=1, sort_keys=True))
    except NixError as failure:
        log.append(f"derivation show failed: {failure}")

    here = workspace.REPO
    elf_needs = json.loads((here / "pkgs" / "server-env" / "elf-needs.json").read_text())
    audit = json.loads((here / "pkgs" / "server-env" / "elf-dlopen.json").read_text())
    driver_wheels = sorted(n for n, e in elf_needs["packages"].items() if e.get("driver"))

    def need(attr: str) -> dict[str, Any]:
        if attr not in tops or tops[attr] not in merged:
            raise NixError(
                f"nix derivation show {attr}", "error: its derivation could not be shown (see above)"
            )
        return closure(merged, tops[attr])

    step(
        results,
        "driver runpath",
        lambda: check.driver_runpath(need("server"), driver_wheels),
    )
    placeholder = subprocess.run(
        [*nix_argv, "eval", "--raw", "--expr", 'builtins.placeholder "out"'],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    step(
        results, "dlopen runpaths", lambda: check.dlopen_runpaths(need("server"), audit, PY_SITE, placeholder)
    )

    def image() -> check.Result:
        return check.image_tagged(
            nix.eval_json(
                f"packages.{SYSTEM}.image", "i: { inherit (i) imageName imageTag; path = i.outPath; }"
            )
        )

    step(results, "image tag", image)

    def loader() -> check.Result:
        sources_text = {
            str(p.relative_to(flake)): p.read_text()
            for p in (flake / "images" / "entrypoint" / "src").rglob("*.py")
        }
        rootfs = [d for d in need("image").values() if d["name"] == "bitexact-rootfs"]
        script = str(check.env_of(rootfs[0]).get("buildCommand", "")) if rootfs else ""
        return check.image_runs_no_host_binary_without_loader(sources_text, script)

    step(results, "image host binaries", loader)

    def seed() -> check.Result:
        weights = nix.eval_json(
            f"packages.{SYSTEM}.weights",
            "w: builtins.concatLists (map (r: map (f: f.drvPath) (builtins.attrValues r)) "
            "(builtins.attrValues w.files))",
        )
        return check.seed_downloads_nothing(need("seed-weights"), tops["seed-weights"], weights)

    step(results, "seed-weights", seed)

    def lock() -> check.Result:
        upstream = json.loads((sources["nix2container"].path / "flake.lock").read_text())
        return check.nix2container_keeps_its_nixpkgs(json.loads((flake / "flake.lock").read_text()), upstream)

    step(results, "nix2container nixpkgs", lock)

    def gpu() -> check.Result:
        if not gpu_drvs:
            raise NixError("GPU checks", "error: no gpu-* check to look into")
        return check.gpu_checks_shape({n: closure(merged, p) for n, p in gpu_drvs.items()}, PY_SITE)

    step(results, "GPU checks shape", gpu)
    return results


def parse_inputs(values: list[str]) -> dict[str, Path]:
    out = {}
    for value in values:
        name, sep, path = value.partition("=")
        if not sep:
            raise SystemExit(f"--input takes NAME=PATH, got {value!r}")
        out[name] = Path(path)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, default=workspace.REPO, help="the checkout (default: this one)")
    parser.add_argument("--rev", default="HEAD", help="the commit to evaluate (default: HEAD)")
    parser.add_argument("--worktree", action="store_true", help="evaluate the working tree instead of --rev")
    parser.add_argument(
        "--mirror", type=Path, default=Path("/work/.mirror"), help="snapshots, as `fetch` lays them out"
    )
    parser.add_argument(
        "--input", action="append", default=[], metavar="NAME=PATH",
        help="a snapshot for one input instead of --mirror's (uv2nix, pyproject-nix, "
        "pyproject-build-systems, nix2container, nixpkgs-lib)",
    )  # fmt: skip
    parser.add_argument(
        "--nixpkgs", type=Path, help="a real nixpkgs (checkout or git dir) instead of the stand-in"
    )
    parser.add_argument("--nix", default="nix", help="the nix command (default: nix on PATH; 2.18 or later)")
    parser.add_argument("--report", type=Path, help="also write the report here")
    parser.add_argument("--out", type=Path, help="keep the derivations shown here (derivations.json)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    args = parser.parse_args(argv)
    args.input = parse_inputs(args.input)

    log: list[str] = [f"upstream evaluation, {time.strftime('%Y-%m-%d %H:%M:%S %Z')}"]
    scratch = Path(tempfile.mkdtemp(prefix="upstream-eval-"))
    try:
        results = evaluate(args, scratch, log)
    except (OSError, subprocess.CalledProcessError, KeyError, ValueError) as error:
        print("\n".join(log), file=sys.stderr)
        print(f"upstream-eval: could not set up the evaluation: {error}", file=sys.stderr)
        return 2
    finally:
        if not args.keep:
            subprocess.run(["chmod", "-R", "u+w", str(scratch)], check=False)
            subprocess.run(["rm", "-rf", str(scratch)], check=False)
    failed = [r for r in results if not r.passed]
    text = "\n".join(
        [
            *log,
            *(r.render() for r in results),
            "",
            f"{len(results) - len(failed)} passed, {len(failed)} failed",
        ]
    )
    print(text)
    if args.report:
        args.report.parent.mkdir(parents=True, exist_ok=True)
        args.report.write_text(text + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
