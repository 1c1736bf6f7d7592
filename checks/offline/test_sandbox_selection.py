"""The `python-offline-tests` flake check (nix/python-offline-tests.nix) as far as it runs here.

Its source (nix/lib/source-subset.nix) is built with the real Nix, and the sandbox selection
(checkhelpers/sandbox_selection.py: the tests marked neither `network` nor `nix`) runs over exactly that
source in a fresh network namespace (`unshare --net`, loopback only), with every `nix*` executable hidden from
PATH, an empty wheel cache and an empty HOME, by a throwaway Python environment: the repository's own projects
installed into it from wheels (as the flake check's Python holds them, not editable), the third-party packages
those of this test's own environment, which is never changed for it. A test that downloads or runs Nix without
its marker, or reads a file the source leaves out, fails here rather than in the flake check. What cannot run
here is nixpkgs' Python environment: the check's derivation is evaluated against recording doubles, and its
package list is checked against what the source imports.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from checkhelpers.hfcache_support import NIX_CONFIG, NIXPKGS_DOUBLES, nix_error, nix_eval, nix_str

pytestmark = pytest.mark.nix  # the source is built with nix-instantiate

REPO = Path(__file__).resolve().parents[2]
CHECK = "(import ./nix/python-offline-tests.nix)"
SUBSET = "(import ./nix/lib/source-subset.nix)"
# Areas whose Nix-free, network-free tests must run (not merely be collected) in the selection.
MUST_RUN = {
    "bitexact (tiny transformers models and fake servers)": "checks.offline.bitexact.",
    "launcher": "checks.offline.test_launcher_",
    "image entrypoint": "checks.offline.test_entrypoint",
    "lock tool": "checks.offline.test_lock_",
}
# Imported only where present, never by the selected tests (bitexact's in-process sglang engine).
OPTIONAL_IMPORTS = {"sglang"}
# Module name -> python3Packages attribute, where they differ.
NIXPKGS_NAMES = {"huggingface_hub": "huggingface-hub", "pynvml": "nvidia-ml-py"}


def build(expr: str) -> Path:
    """The store path of a builtins.path expression, copied into the store (read-write evaluation)."""
    cmd = ["nix-instantiate", "--eval", "--read-write-mode", "--json", "--expr", expr]
    env = {**os.environ, "NIX_CONFIG": NIX_CONFIG}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO, timeout=300)
    assert done.returncode == 0, done.stderr
    return Path(json.loads(done.stdout))


@pytest.fixture(scope="module")
def source() -> Path:
    return build(f"{CHECK}.source")


def files_under(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if not p.is_dir())


def test_source_subset_keeps_the_included_paths_only(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    for rel in (
        "a/keep.py",
        "a/deep/keep.txt",
        "a/__pycache__/keep.cpython-312.pyc",
        "a/stray.pyc",
        "a/pkg.egg-info/PKG-INFO",
        "b/one.json",
        "b/other.json",
        "c/drop.py",
        "top.py",
    ):
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / rel).write_text(rel)
    root = f"/. + {nix_str(str(tree))}"
    got = build(f'{SUBSET} {{ root = {root}; include = [ "a" "b/one.json" ]; name = "t"; }}')
    assert files_under(got) == ["a/deep/keep.txt", "a/keep.py", "b/one.json"]
    assert (got / "a" / "keep.py").read_text() == "a/keep.py"


def test_source_subset_refuses_a_missing_or_empty_include(tmp_path: Path) -> None:
    root = f"/. + {nix_str(str(tmp_path))}"
    error = nix_error(f'{SUBSET} {{ root = {root}; include = [ "nope/x.py" ]; }}')
    assert "nope/x.py not found under" in error and "fix the include list" in error
    assert "`include` is empty" in nix_error(f"{SUBSET} {{ root = {root}; include = [ ]; }}")


def test_the_check_is_a_sandboxed_build_of_the_selection() -> None:
    """The derivation as nixpkgs would get it, from recording doubles of runCommand, python3 and git:
    no fixed output (which would let the build reach the network), HOME in the build directory, the
    selection script run from the filtered source, git on PATH, the listed python3Packages and each local
    project built by buildPythonPackage with the dependencies its pyproject.toml names (another local
    project's package, else nixpkgs')."""
    got = nix_eval(
        "let check = " + CHECK + "; "
        'ps = builtins.listToAttrs (map (n: { name = n; value = "py-" + n; }) check.pythonPackages) // { '
        'setuptools = "py-setuptools"; '
        "buildPythonPackage = a: { local = a.pname; deps = map (d: d.local or d) a.dependencies; "
        "build = a.build-system; src = toString a.src; }; }; "
        "doubles = { "
        "runCommand = name: env: script: env // { inherit name script; }; "
        "python3.withPackages = f: { env = f ps; }; "
        'git = "/fake-store/git"; }; '
        "drv = check.check doubles; "
        "in { inherit (drv) name script; attrs = builtins.attrNames drv; "
        "tools = builtins.tail drv.nativeBuildInputs; "
        "python = (builtins.head drv.nativeBuildInputs).env; "
        "src = toString check.source; }"
    )
    assert got["name"] == "python-offline-tests"
    assert not {"outputHash", "outputHashMode", "__impure"} & set(got["attrs"])
    script = got["script"]
    assert "export HOME=$TMPDIR" in script
    assert f"cd {got['src']}\n" in script
    assert "python -m checkhelpers.sandbox_selection" in script and "set -o pipefail" in script
    assert got["tools"] == ["/fake-store/git"]
    listed = [p for p in got["python"] if isinstance(p, str)]
    assert sorted(listed) == sorted(f"py-{n}" for n in nix_eval(f"{CHECK}.pythonPackages"))
    local = {p["local"]: p for p in got["python"] if isinstance(p, dict)}
    projects = [project_of(folder) for folder in nix_eval(f"{CHECK}.localProjects")]
    names = {project["name"] for project in projects}
    assert sorted(local) == sorted(names) and "bitexact-kernel-harness" in names
    for project in projects:
        built = local[project["name"]]
        deps = [d if d in names else f"py-{d}" for d in project.get("dependencies", [])]
        assert (built["deps"], built["build"]) == (deps, ["py-setuptools"]), project["name"]
        assert built["src"].endswith(f"-{project['name']}-source"), built["src"]


def project_of(folder: str) -> dict[str, Any]:
    return tomllib.loads((REPO / folder / "pyproject.toml").read_text())["project"]


def test_the_check_holds_the_projects_that_run_sh_installs() -> None:
    """The flake check's local packages are the projects checks/offline/run.sh installs (pip -e), so the
    tests import the same packages in both."""
    loop = re.search(r"^for project in (.+); do$", (REPO / "checks" / "offline" / "run.sh").read_text(), re.M)
    assert loop is not None, "run.sh has no `for project in ...; do` install loop"
    assert sorted(nix_eval(f"{CHECK}.localProjects")) == sorted(loop.group(1).split())


def test_cpu_checks_holds_the_check() -> None:
    """nix/cpu-checks.nix as nix/outputs.nix calls it (recording doubles for nixpkgs) gives
    `python-offline-tests`, the derivation above."""
    got = nix_eval(
        f"let d = {NIXPKGS_DOUBLES}; "
        'pkgs = d // { python3 = d.python3 // { withPackages = f: "/fake-store/python-env"; }; '
        'git = "/fake-store/git"; }; '
        "checks = import ./nix/cpu-checks.nix { inherit pkgs; inherit (d) lib; "
        "deep-gemm = null; sglangSrc = null; sglangPatches = [ ]; }; "
        "c = checks.python-offline-tests; "
        f"in {{ names = builtins.attrNames checks; inherit (c) name script nativeBuildInputs; "
        f"src = toString {CHECK}.source; }}"
    )
    assert "python-offline-tests" in got["names"] and "nix-lib" in got["names"]
    assert got["name"] == "python-offline-tests"
    assert got["nativeBuildInputs"] == ["/fake-store/python-env", "/fake-store/git"]
    assert f"cd {got['src']}\n" in got["script"]


def test_the_source_carries_the_evidence_claims_and_pages_only() -> None:
    """Of docs/evidence, the source holds each folder's claims.json and results.md, never a raw result (the
    claims test checks those against the raw files in a full checkout); every page a claim may name."""
    include = nix_eval(f"{CHECK}.include")
    evidence = REPO / "docs" / "evidence"
    carried = sorted(p for p in include if p.startswith("docs/evidence/"))
    assert all(p.endswith(("/claims.json", "/results.md")) for p in carried), carried
    folders = sorted(p.name for p in evidence.iterdir() if p.is_dir())
    assert sorted(p.split("/")[2] for p in carried if p.endswith("/claims.json")) == folders
    pages = sorted(f"docs/{p.name}" for p in (REPO / "docs").glob("*.md"))
    assert set(pages) <= set(include) and "README.md" in include


def test_an_evidence_folder_without_claims_is_refused(tmp_path: Path) -> None:
    """The include list is built from docs/evidence itself: a folder without claims.json stops the
    evaluation, naming the folder and the fix."""
    (tmp_path / "nix").mkdir()
    shutil.copy(REPO / "nix" / "python-offline-tests.nix", tmp_path / "nix")
    (tmp_path / "docs" / "evidence" / "old-run").mkdir(parents=True)
    (tmp_path / "docs" / "evidence" / "old-run" / "claims.json").write_text("{}")
    (tmp_path / "docs" / "page.md").write_text("a page\n")
    got = nix_eval(f"(import {tmp_path}/nix/python-offline-tests.nix).include")
    assert {"docs/page.md", "docs/evidence/old-run/claims.json"} <= set(got)
    (tmp_path / "docs" / "evidence" / "new-run").mkdir()
    error = nix_error(f"(import {tmp_path}/nix/python-offline-tests.nix).include")
    assert "docs/evidence/new-run has no claims.json" in error and "docs/evidence/README.md" in error


def imported_modules(source: Path) -> dict[str, set[str]]:
    """Top-level third-party modules each file of the source imports (anywhere in the file), GPU
    checks aside (they skip without CUDA): not the standard library, not the source's own modules."""
    own = {p.stem for p in source.rglob("*.py")} | {p.name for p in source.rglob("*") if p.is_dir()}
    found: dict[str, set[str]] = {}
    for path in source.rglob("*.py"):
        rel = str(path.relative_to(source))
        if rel.startswith("checks/gpu/"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in own:
                    found.setdefault(top, set()).add(rel)
    return found


def test_the_python_environment_covers_the_imports(source: Path) -> None:
    listed = set(nix_eval(f"{CHECK}.pythonPackages"))
    imports = imported_modules(source)
    assert {"pytest", "torch", "transformers"} <= set(imports)  # the scan sees the tests
    missing = {
        module: sorted(files)
        for module, files in imports.items()
        if module not in OPTIONAL_IMPORTS and NIXPKGS_NAMES.get(module, module) not in listed
    }
    assert not missing, f"add to pythonPackages in nix/python-offline-tests.nix: {missing}"


def path_without_nix(bin_dir: Path) -> str:
    """A PATH of one directory linking every executable on the current PATH except `nix*`."""
    bin_dir.mkdir()
    for entry in os.environ["PATH"].split(os.pathsep):
        directory = Path(entry)
        if not directory.is_dir():
            continue
        for exe in sorted(directory.iterdir()):
            link = bin_dir / exe.name
            if exe.name.startswith("nix") or link.exists() or not os.access(exe, os.X_OK):
                continue
            link.symlink_to(exe)
    return str(bin_dir)


def network_namespace() -> list[str] | None:
    """The unshare command that gives a new network namespace here (root, else a user namespace)."""
    for command in (["unshare", "--net"], ["unshare", "--net", "--map-root-user"]):
        try:
            probe = subprocess.run([*command, "true"], capture_output=True, timeout=30)
        except FileNotFoundError:
            return None
        if probe.returncode == 0:
            return command
    return None


NO_NETWORK = REPO / "checks" / "offline" / "no_network" / "sitecustomize.py"
RUN_SH = REPO / "checks" / "offline" / "run.sh"


def local_projects() -> list[str]:
    """The repository's own projects, as checks/offline/run.sh installs them (its loop is the one list)."""
    found = re.search(r"^for project in (.+); do$", RUN_SH.read_text(), re.MULTILINE)
    assert found, f"{RUN_SH} has no `for project in ...; do` install loop to read the projects from"
    return found[1].split()


def bare_environment(dest: Path, blocked: bool) -> Path:
    """A venv without pip; `blocked`: no_network's sitecustomize in its site-packages, so every process of
    its Python refuses connections that leave the machine. Its site-packages."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(dest)], check=True, timeout=300)
    python = dest / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    if blocked:
        shutil.copy(NO_NETWORK, Path(purelib) / "sitecustomize.py")
    return Path(purelib)


def selection_python(tmp_path: Path, blocked: bool) -> Path:
    """The throwaway environment's Python: the local projects built into wheels from copies (a build
    writes into its tree) by this environment's pip and setuptools, installed into it without an index;
    this environment's site-packages named after them in a .pth file (site's own start-up reading: the
    third-party packages; PYTHONPATH stays unset), so the projects' own installed copies come first."""
    wheels, builds = tmp_path / "wheels", tmp_path / "builds"
    projects = []
    for project in local_projects():
        copy = builds / project
        ignore = shutil.ignore_patterns("build", "*.egg-info", "__pycache__", "test_*.py", "conftest.py")
        shutil.copytree(REPO / project, copy, ignore=ignore)
        projects.append(str(copy))
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input", "--quiet"]
    built = subprocess.run(
        [*pip, "wheel", "--no-deps", "--no-index", "--no-build-isolation", "-w", str(wheels), *projects],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert built.returncode == 0, built.stdout[-4000:] + built.stderr[-4000:]
    venv = tmp_path / "venv"
    site = bare_environment(venv, blocked)
    python = venv / "bin" / "python"
    wheel_files = sorted(str(w) for w in wheels.glob("*.whl"))
    assert len(wheel_files) == len(projects), wheel_files
    install = [*pip, "--python", str(python), "install", "--no-deps", "--no-index", *wheel_files]
    done = subprocess.run(install, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    ours = {p for p in sysconfig.get_paths().values() if p.endswith("-packages")}
    (site / "third-party-from-the-test-environment.pth").write_text("".join(f"{p}\n" for p in sorted(ours)))
    return python


def run_selection(source: Path, tmp_path: Path, unshare: list[str] | None) -> list[Any]:
    """The selection over `source` with nix hidden, empty caches, and no network: a network namespace
    where one can be made, else Python's connections blocked (checks/offline/no_network, in the throwaway
    environment's site-packages)."""
    env = {
        **os.environ,
        "PATH": path_without_nix(tmp_path / "bin"),
        "HOME": str(tmp_path / "home"),
        "BITEXACT_ARTIFACTS": str(tmp_path / "artifacts"),  # no wheels downloaded earlier
        "HF_HOME": str(tmp_path / "hf"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    env.pop("PYTHONPATH", None)
    junit = tmp_path / "junit.xml"
    python = selection_python(tmp_path, blocked=unshare is None)
    command = [str(python), "-m", "checkhelpers.sandbox_selection", "-q", f"--junitxml={junit}"]
    if unshare is not None:
        command = [*unshare, *command[:3], "--loopback-up", *command[3:]]
    done = subprocess.run(command, cwd=source, env=env, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-8000:] + done.stderr[-4000:]
    return list(ET.parse(junit).getroot().iter("testcase"))


def test_the_fallback_blocks_python_connections_that_leave_the_machine(tmp_path: Path) -> None:
    probe = (
        "import socket\n"
        "server = socket.create_server(('127.0.0.1', 0))\n"
        "socket.create_connection(server.getsockname()).close()  # loopback stays open\n"
        "try:  # TEST-NET-1: never routed, so only the block can answer at once\n"
        "    socket.create_connection(('192.0.2.1', 443), timeout=10)\n"
        "except OSError as e:\n"
        "    print('refused:', e)\n"
    )
    bare_environment(tmp_path / "venv", blocked=True)
    python = tmp_path / "venv" / "bin" / "python"
    done = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "refused:" in done.stdout and "blocked by checks/offline/no_network" in done.stdout


def test_the_selection_passes_over_the_source_without_network_or_nix(source: Path, tmp_path: Path) -> None:
    cases = run_selection(source, tmp_path, network_namespace())
    skipped = [(c.get("classname", ""), s.get("message", "")) for c in cases for s in c.iter("skipped")]
    passed = [c.get("classname", "") for c in cases if not any(c.iter("skipped"))]
    # A test that needs Nix but skips when it is missing would pass silently without its marker.
    assert not [s for s in skipped if re.search(r"\bnix", s[1], re.IGNORECASE)], skipped
    for area, prefix in MUST_RUN.items():
        assert any(name.startswith(prefix) for name in passed), f"no {area} test ran: {sorted(set(passed))}"
