"""The properties an upstream evaluation asserts, as pure functions over what Nix printed (derivations
from `nix derivation show`, values from `nix eval`) and the repository's own data. Each returns a
Result: passed or not, with one line per finding, so a failure says what and where."""

from __future__ import annotations

import ast
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

Derivations = Mapping[str, Mapping[str, Any]]

DRIVER_HOOK = "auto-add-driver-runpath-hook"
PATCHELF_HOOK = "auto-patchelf-hook"


@dataclass
class Result:
    name: str
    passed: bool
    details: list[str] = field(default_factory=list)

    def render(self) -> str:
        head = f"{'PASS' if self.passed else 'FAIL'}  {self.name}"
        return "\n".join([head, *(f"      {line}" for line in self.details)])


def env_of(drv: Mapping[str, Any]) -> dict[str, Any]:
    """A derivation's environment; structured attributes (`__json`) unpacked."""
    env = dict(drv.get("env", {}))
    if "__json" in env:
        env.update(json.loads(env.pop("__json")))
    return env


def out_path(drv: Mapping[str, Any]) -> str:
    return str(drv["outputs"]["out"]["path"])


def words(value: Any) -> list[str]:
    """An input list as the derivation holds it: a space-separated string, or a list (structured)."""
    if isinstance(value, list):
        return [str(v) for v in value]
    return str(value or "").split()


def by_pname(drvs: Derivations) -> dict[str, list[tuple[str, Mapping[str, Any]]]]:
    found: dict[str, list[tuple[str, Mapping[str, Any]]]] = {}
    for path, drv in drvs.items():
        pname = env_of(drv).get("pname")
        if pname:
            found.setdefault(str(pname), []).append((path, drv))
    return found


def by_name(drvs: Derivations, name: str) -> list[Mapping[str, Any]]:
    return [d for d in drvs.values() if d.get("name") == name]


def is_fixed_output(drv: Mapping[str, Any]) -> bool:
    return any("hash" in o or "hashAlgo" in o for o in drv.get("outputs", {}).values())


# --- the assertions ---------------------------------------------------------------------------------


def outputs_are_real(names: Mapping[str, Mapping[str, str]], expected_gpu_checks: Iterable[str]) -> Result:
    """No output is a `*-needs-pins` stand-in, and every GPU check is among the flake checks.
    `names`: output kind (packages, checks, apps) -> attribute -> derivation name or app program."""
    details = []
    for kind, attrs in sorted(names.items()):
        for attr, value in sorted(attrs.items()):
            if "-needs-pins" in value:
                details.append(f"{kind}.{attr} is still a needs-pins stand-in ({value})")
    missing = sorted(set(expected_gpu_checks) - set(names.get("checks", {})))
    if missing:
        details.append(f"GPU checks missing from checks: {', '.join(missing)}")
    total = sum(len(a) for a in names.values())
    ok = not details
    return Result(
        "every output evaluates for real (no *-needs-pins stand-in) and every GPU check is present",
        ok,
        details if details else [f"{total} outputs; GPU checks: {', '.join(sorted(expected_gpu_checks))}"],
    )


def evaluates_without_ifd(returncode: int, error: str) -> Result:
    return Result(
        "`nix flake check --no-build` passes with allow-import-from-derivation = false",
        returncode == 0,
        [] if returncode == 0 else [error],
    )


def driver_runpath(closure: Derivations, wheels: Iterable[str]) -> Result:
    """Each of `wheels` (those whose libraries load the driver) has autoAddDriverRunpath in its
    nativeBuildInputs, after autoPatchelfHook (both are postFixup hooks in that order; autoPatchelf
    replaces the RUNPATH, so a driver runpath added before it would be lost)."""
    hooks = {name: [out_path(d) for d in by_name(closure, name)] for name in (DRIVER_HOOK, PATCHELF_HOOK)}
    packages = by_pname(closure)
    details, good = [], []
    for wheel in sorted(wheels):
        found = [(p, d) for p, d in packages.get(wheel, []) if "nativeBuildInputs" in env_of(d)]
        if not found:
            details.append(f"{wheel}: no derivation in the server's closure")
            continue
        for _, drv in found:
            inputs = words(env_of(drv)["nativeBuildInputs"])
            driver = [i for i, p in enumerate(inputs) if p in hooks[DRIVER_HOOK]]
            patchelf = [i for i, p in enumerate(inputs) if p in hooks[PATCHELF_HOOK]]
            if not driver:
                details.append(f"{wheel} ({drv['name']}): no autoAddDriverRunpath")
            elif patchelf and min(driver) < max(patchelf):
                details.append(f"{wheel} ({drv['name']}): autoAddDriverRunpath runs before autoPatchelfHook")
            else:
                good.append(wheel)
    return Result(
        "every wheel whose libraries load the NVIDIA driver gets the driver runpath (after autoPatchelf)",
        not details,
        details or [f"{len(good)} wheels: {', '.join(sorted(set(good)))}"],
    )


def dlopen_runpaths(
    closure: Derivations, audit: Mapping[str, Any], site_packages: str, own_placeholder: str
) -> Result:
    """Every dlopen target a locked wheel's library reached through its original RUNPATH (elf-dlopen.json)
    is on the RUNPATH autoPatchelf will write: its directory is in the wheel's appendRunpaths (the wheel's
    own output through the `out` placeholder, a sibling wheel through its store path)."""
    packages = by_pname(closure)
    details, checked = [], 0
    for package, entry in sorted(audit["packages"].items()):
        drvs = packages.get(package, [])
        if not drvs:
            details.append(f"{package}: no derivation in the server's closure")
            continue
        append = set(words(env_of(drvs[0][1]).get("appendRunpaths", "")))
        for library, info in sorted(entry["libraries"].items()):
            for soname, locations in sorted(info["reached"].items()):
                checked += 1
                wanted = []
                for provider, directory in locations:
                    if provider == package:
                        wanted.append(f"{own_placeholder}/{site_packages}/{directory}")
                    else:
                        wanted += [
                            f"{out_path(d)}/{site_packages}/{directory}"
                            for _, d in packages.get(provider, [])
                        ]
                if not append & set(wanted):
                    details.append(
                        f"{package}: {library} dlopens {soname}, in none of its RUNPATH directories"
                    )
    return Result(
        "every dlopen target of a locked wheel's library is reachable on its planned RUNPATH",
        not details,
        details[:40] + ([f"... and {len(details) - 40} more"] if len(details) > 40 else [])
        if details
        else [f"{checked} (library, target) pairs"],
    )


def image_tagged(image: Mapping[str, str]) -> Result:
    """nix2container tags with the first part of the image description's store name when `tag` is null;
    copyToDockerDaemon and copyToRegistry push `<imageName>:<imageTag>`."""
    hash_part = image["path"].rsplit("/", 1)[-1].split("-", 1)[0]
    ok = bool(image["imageTag"]) and image["imageTag"] != hash_part
    return Result(
        "the image has a tag of its own (not nix2container's output-hash default)",
        ok,
        [f"{image['imageName']}:{image['imageTag']}"]
        + ([] if ok else [f"the tag is the store hash {hash_part} (tag = null)"]),
    )


HOST_BINARIES = ("nvidia-smi",)


def names_host_binary(source: str) -> bool:
    """Whether Python code holds a host binary's name as a string value (an argv element, a path),
    docstrings aside: what the NVIDIA container toolkit mounts into the image (nvidia-smi)."""
    tree = ast.parse(source)
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return any(
        isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
        and node.value.rsplit("/", 1)[-1] in HOST_BINARIES
        for node in ast.walk(tree)
    )


def image_runs_no_host_binary_without_loader(
    entrypoint_sources: Mapping[str, str], rootfs_script: str
) -> Result:
    """A host binary the NVIDIA container toolkit mounts (nvidia-smi) needs the host's loader at
    /lib64/ld-linux-x86-64.so.2, which a Nix rootfs lacks: the entrypoint runs none, or the image has
    the link."""
    users = sorted(path for path, text in entrypoint_sources.items() if names_host_binary(text))
    loader = "ld-linux-x86-64.so.2" in rootfs_script
    ok = not users or loader
    return Result(
        "the image runs no host binary, or has the loader link it needs",
        ok,
        [f"entrypoint sources naming nvidia-smi: {', '.join(users) or 'none'}; loader link: {loader}"],
    )


def seed_downloads_nothing(seed_closure: Derivations, seed_drv: str, weight_drvs: Iterable[str]) -> Result:
    """`nix run .#seed-weights` builds its script only: no weight fetch in its closure and no
    fixed-output derivation among its direct inputs."""
    weights = set(weight_drvs)
    inside = sorted(weights & set(seed_closure))
    direct = seed_closure[seed_drv].get("inputDrvs", {})
    fixed = sorted(p for p in direct if p in seed_closure and is_fixed_output(seed_closure[p]))
    details = [f"weight fetch in its closure: {p}" for p in inside[:10]]
    details += [f"fixed-output input: {p}" for p in fixed[:10]]
    return Result(
        "seed-weights has no fixed-output inputs (it downloads nothing before it runs)",
        not details,
        details or [f"{len(direct)} direct inputs, none fixed-output; {len(weights)} weight fetches outside"],
    )


def nix2container_keeps_its_nixpkgs(lock: Mapping[str, Any], upstream_lock: Mapping[str, Any]) -> Result:
    """flake.lock's nixpkgs for nix2container is the node nix2container's own flake.lock locks."""
    nodes = lock["nodes"]
    target = nodes["nix2container"].get("inputs", {}).get("nixpkgs")
    upstream = upstream_lock["nodes"][upstream_lock["nodes"]["root"]["inputs"]["nixpkgs"]]
    if not isinstance(target, str):
        return Result(
            "nix2container's nixpkgs is the one of its own flake.lock",
            False,
            [f"nix2container's nixpkgs follows {target}"],
        )
    ok = nodes[target]["locked"] == upstream["locked"] and nodes[target]["original"] == upstream["original"]
    return Result(
        "nix2container's nixpkgs is the one of its own flake.lock",
        ok,
        [f"locked {nodes[target]['locked']['rev'][:12]}, upstream's {upstream['locked']['rev'][:12]}"],
    )


def gpu_checks_shape(checks: Mapping[str, Derivations], python_site: str) -> Result:
    """One run asks for `cuda` and calls the runner (`bitexact-gpu-checks run`) whole on the plan Nix wrote;
    every check is that run's verdict for its own step (`bitexact-gpu-checks verdict`) and asks for no
    GPU; the runner and bitexact run on the venv's Python (built for it); the kernel checks' Python puts
    the venv's packages ahead of nixpkgs' pytest."""
    details = []
    wrappers: dict[str, Mapping[str, Any]] = {}
    runs: set[str] = set()
    shown: list[str] = []  # the builders as they are, for the report
    for name, closure in sorted(checks.items()):
        top = next(d for d in closure.values() if d["name"] == name)
        env = env_of(top)
        builder = str(env.get("buildCommand", ""))
        if "cuda" in words(env.get("requiredSystemFeatures", "")):
            details.append(f"{name}: the verdict asks for cuda")
        if "bitexact-gpu-checks verdict " not in builder or name not in builder:
            details.append(f"{name}: its builder is not the runner's verdict of {name}")
        run = by_name(closure, "gpu-checks-run")
        if len(run) != 1:
            details.append(f"{name}: {len(run)} gpu-checks-run derivations in its closure, not one")
            continue
        run_env = env_of(run[0])
        runs.add(out_path(run[0]))
        if "cuda" not in words(run_env.get("requiredSystemFeatures", "")):
            details.append("gpu-checks-run does not ask for cuda")
        command = str(run_env.get("buildCommand", "")).replace("'", "")
        plans = [d for d in closure.values() if str(d.get("name", "")).startswith("gpu-plan-")]
        if (
            "bitexact-gpu-checks run " not in command
            or not plans
            or f"--plan {out_path(plans[0])}" not in command
        ):
            details.append(
                "gpu-checks-run does not call `bitexact-gpu-checks run --plan <the plan Nix wrote>`"
            )
        if not shown:
            line = next((ln.strip() for ln in command.splitlines() if "bitexact-gpu-checks run " in ln), "")
            shown += [f"run: {line[:400]}", f"{name}: {builder.strip().splitlines()[0][:300]}"]
        wanted = ("bitexact", "python", "bitexact-gpu-checks")
        wrappers.update({p: d for p, d in closure.items() if d["name"] in wanted})
    if len(runs) > 1:
        details.append(f"the checks read {len(runs)} different runs, not one")
    for drv in wrappers.values():
        text = str(env_of(drv).get("text", ""))
        if "export PYTHONPATH=" not in text:
            continue
        entries = text.split("export PYTHONPATH=", 1)[1].split("$", 1)[0].split(":")
        if drv["name"] != "python" and not all(f"/{python_site}" in e for e in entries if e):
            details.append(
                f"{drv['name']} wrapper: PYTHONPATH {':'.join(entries)} is not the venv Python's "
                f"({python_site})"
            )
        if drv["name"] == "bitexact-gpu-checks" and "-m gpuchecks" not in text:
            details.append("the runner's wrapper does not run `python -m gpuchecks`")
        if drv["name"] == "python" and ("pytest" in entries[0] or "venv" not in entries[0]):
            details.append(
                f"kernel tests' python: PYTHONPATH starts with {entries[0]}, not the venv's site-packages"
            )
    return Result(
        "GPU checks: one run of the runner on the plan, asking for cuda; each check its step's verdict, "
        "needing no GPU; the runner, bitexact and pytest fit the venv's Python",
        not details,
        details or [f"{len(checks)} GPU checks of {len(runs)} run, {len(wrappers)} Python wrappers", *shown],
    )
