"""The house's rules, read from a repository's own files: its Python modules and the imports between
them (by AST, resolved as the installed projects provide them), module sizes, which wing imports which,
README's layout block, `sys.path` edits and pytest `pythonpath` settings. test_house.py holds the
repository to them, and shows each rule failing on a tree built to break it.

Which file an import names: the module an installed project provides under that dotted name. The
projects are the repository's pyproject.toml files, read as setuptools reads them: a `packages.find`
folder (with its `include` patterns), a `package-dir` entry naming a package's folder, `py-modules`.
Relative imports resolve inside the package. An import that names no module of a project and no file of
the repository is the standard library or a third-party package: no edge. One that names no project's
module but does match a repository file's name reaches that file by a path someone set: a problem.
"""

from __future__ import annotations

import ast
import fnmatch
import functools
import os
import subprocess
import sys
import tomllib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

LIMIT = 700  # lines a module may have
SKIPPED = ("docs/evidence/", ".cache/", ".venv/")  # recorded results and local caches, not the house
PRODUCT = ("pkgs/", "images/", "nix/", "patches/")
CHECKS = ("checks/",)
LAB = ("lab/",)
# Who may not import whom: the product neither the checks nor the lab, the checks not the lab.
FORBIDDEN = ((PRODUCT, CHECKS + LAB), (CHECKS, LAB))


def rel(root: Path, path: Path) -> str:
    return path.relative_to(root).as_posix()


def _listed(root: Path, pattern: str) -> list[str]:
    """What git tracks or would track matching the pattern (a tree without git: every matching file)."""
    if (root / ".git").exists():
        listed = subprocess.run(
            ["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard", pattern],
            capture_output=True,
            check=True,
        ).stdout
        return sorted({n for n in os.fsdecode(listed).split("\0") if n})
    leaf = pattern.rsplit("/", 1)[-1]
    return sorted(
        rel(root, Path(d) / f) for d, _, fs in os.walk(root) for f in fs if fnmatch.fnmatch(f, leaf)
    )


def python_files(root: Path) -> list[Path]:
    """The repository's Python modules, less SKIPPED."""
    names = _listed(root, "*.py")
    return [root / n for n in names if not n.startswith(SKIPPED) and (root / n).is_file()]


def top_folders(root: Path) -> set[str]:
    """The folders at the top of what git tracks."""
    listed = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-z"], capture_output=True, check=True
    ).stdout
    return {n.split("/", 1)[0] for n in os.fsdecode(listed).split("\0") if "/" in n}


# --- sys.path edits and pytest's pythonpath ------------------------------------------------------------


def _is_sys_path(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Attribute) and node.attr == "path" and getattr(node.value, "id", None) == "sys"
    )


def sys_path_edits(tree: ast.Module) -> list[ast.AST]:
    """Every statement that changes `sys.path`: a call of one of its methods that change it, an
    assignment to it, to a slice of it, or an augmented one."""
    found: list[ast.AST] = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and _is_sys_path(node.func.value)
        ):
            if node.func.attr in ("insert", "append", "extend", "remove", "pop", "clear"):
                found.append(node)
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if _is_sys_path(target) or (isinstance(target, ast.Subscript) and _is_sys_path(target.value)):
                    found.append(node)
    return found


def sys_path_editors(root: Path, files: Iterable[Path]) -> list[str]:
    """The modules (relative paths) that edit `sys.path`, each with its first edit's line."""
    out = []
    for f in files:
        edits = sys_path_edits(_parse(f))
        if edits:
            where = f"{rel(root, f)}:{edits[0].lineno}"
            out.append(f"{where} edits sys.path: import what it needs as an installed package")
    return out


def pytest_pythonpath_settings(root: Path) -> list[str]:
    """pytest `pythonpath` settings (pyproject.toml, pytest.ini, setup.cfg, tox.ini): each one adds
    folders to sys.path behind the imports' back."""
    out = []
    for name in [
        *_listed(root, "*pyproject.toml"),
        *_listed(root, "*pytest.ini"),
        *_listed(root, "*setup.cfg"),
        *_listed(root, "*tox.ini"),
    ]:
        if name.startswith(SKIPPED):
            continue
        text = (root / name).read_text()
        if name.endswith(".toml"):
            options = tomllib.loads(text).get("tool", {}).get("pytest", {}).get("ini_options", {})
            if "pythonpath" in options:
                out.append(f"{name}: [tool.pytest.ini_options] pythonpath")
        elif any(line.split("=", 1)[0].strip() == "pythonpath" for line in text.splitlines() if "=" in line):
            out.append(f"{name}: pythonpath")
    return out


# --- what the projects install --------------------------------------------------------------------------


@dataclass
class Project:
    """What one pyproject.toml installs, as setuptools reads it."""

    folder: Path
    finds: list[tuple[Path, list[str]]] = field(default_factory=list)  # (where, include patterns)
    packages: dict[str, Path] = field(default_factory=dict)  # package-dir: name -> folder
    modules: dict[str, Path] = field(default_factory=dict)  # py-modules: name -> file

    def provides(self, dotted: str) -> Path | None:
        """The file this project installs under the dotted name, or None."""
        if dotted in self.modules:
            return self.modules[dotted] if self.modules[dotted].is_file() else None
        top, _, rest = dotted.partition(".")
        if top in self.packages:
            return _module_file(self.packages[top], rest)
        for where, include in self.finds:  # find() installs packages, never loose modules beside them
            if (where / top / "__init__.py").is_file() and any(fnmatch.fnmatch(top, p) for p in include):
                found = _module_file(where, dotted)
                if found is not None:
                    return found
        return None

    def name_of(self, path: Path) -> str | None:
        """The dotted name this project installs the file under, or None."""
        for name, file in self.modules.items():
            if file == path:
                return name
        for name, folder in self.packages.items():
            if path.is_relative_to(folder):
                return _dotted(name, path.relative_to(folder))
        for where, include in self.finds:
            if path.is_relative_to(where) and path.parent != where:
                top = path.relative_to(where).parts[0]
                if (where / top / "__init__.py").is_file() and any(fnmatch.fnmatch(top, p) for p in include):
                    return _dotted("", path.relative_to(where))
        return None


def _dotted(prefix: str, relative: Path) -> str:
    parts = list(relative.with_suffix("").parts)
    if parts and parts[-1] == "__init__":
        parts.pop()
    return ".".join([prefix, *parts] if prefix else parts)


def _init(folder: Path) -> Path | None:
    init = folder / "__init__.py"
    return init if init.is_file() else None


def _module_file(folder: Path, dotted: str) -> Path | None:
    if not dotted:
        return _init(folder)
    base = folder.joinpath(*dotted.split("."))
    for candidate in (base.with_name(base.name + ".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def read_project(pyproject: Path) -> Project | None:
    """The project a pyproject.toml declares, or None where it installs no Python module (a lock-only
    project)."""
    tool = tomllib.loads(pyproject.read_text()).get("tool", {}).get("setuptools")
    if tool is None:
        return None
    folder = pyproject.parent.resolve()
    dirs = tool.get("package-dir", {})
    base = (folder / dirs.get("", ".")).resolve()
    project = Project(folder)
    project.packages = {k: (folder / v).resolve() for k, v in dirs.items() if k}
    project.modules = {m: base / f"{m.replace('.', '/')}.py" for m in tool.get("py-modules", [])}
    packages = tool.get("packages")
    if isinstance(packages, dict) and "find" in packages:
        find = packages["find"]
        for where in find.get("where", ["."]):
            project.finds.append(((folder / where).resolve(), find.get("include", ["*"])))
    elif isinstance(packages, list):
        for name in packages:
            top = name.split(".")[0]
            if top not in project.packages:
                project.packages[top] = base / top
    return project


def projects(root: Path) -> list[Project]:
    found = []
    for name in _listed(root, "*pyproject.toml"):
        if not name.startswith(SKIPPED):
            project = read_project(root / name)
            if project is not None:
                found.append(project)
    return found


# --- the import graph ----------------------------------------------------------------------------------


def _parse(path: Path) -> ast.Module:
    stat = path.stat()
    return _parse_version(path, stat.st_mtime_ns, stat.st_size)


@functools.cache
def _parse_version(path: Path, mtime_ns: int, size: int) -> ast.Module:
    return ast.parse(path.read_bytes(), filename=str(path))


def _imports(tree: ast.Module) -> Iterator[tuple[int, str, list[str]]]:
    """(level, module, names) of every import in the module, deferred ones included."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield 0, alias.name, []
        elif isinstance(node, ast.ImportFrom):
            yield node.level, node.module or "", [a.name for a in node.names]


class Graph:
    """The repository's modules and the imports between them that resolve to its files."""

    def __init__(self, root: Path, files: Iterable[Path]) -> None:
        self.root = root.resolve()
        self.files = [f.resolve() for f in files]
        self.projects = projects(self.root)
        # Modules reachable only by a path: flat ones (no package around them) whose names are no standard
        # library module's.
        self.stems = {
            f.stem: rel(self.root, f)
            for f in self.files
            if not (f.parent / "__init__.py").is_file() and f.stem not in sys.stdlib_module_names
        }
        self.edges: dict[Path, set[Path]] = {f: set() for f in self.files}
        self.by_path: dict[Path, set[str]] = {f: set() for f in self.files}
        known = set(self.files)
        for f in self.files:
            for level, module, names in _imports(_parse(f)):
                targets = self._resolve(f, level, module, names)
                self.edges[f] |= {t for t in targets if t in known and t != f}
                top = module.split(".")[0]
                if not level and module and not targets and top in self.stems:
                    self.by_path[f].add(top)

    @functools.cache  # noqa: B019  (one Graph per run)
    def name_of(self, path: Path) -> str | None:
        for project in self.projects:
            name = project.name_of(path)
            if name is not None:
                return name
        return None

    def provided(self, dotted: str) -> Path | None:
        for project in self.projects:
            found = project.provides(dotted)
            if found is not None:
                return found.resolve()
        return None

    def _resolve(self, path: Path, level: int, module: str, names: list[str]) -> list[Path]:
        if level:
            own = self.name_of(path)
            if own is None:
                return []
            parts = own.split(".")
            if path.name != "__init__.py":
                parts = parts[:-1]
            parts = parts[: len(parts) - (level - 1)] if level > 1 else parts
            module = ".".join([*parts, *([module] if module else [])])
        target = self.provided(module) if module else None
        if module and target is None:
            return []
        out = []
        for name in names:  # `from package import submodule` names the submodule's file
            sub = self.provided(f"{module}.{name}")
            if sub is not None:
                out.append(sub)
            elif target is not None:
                out.append(target)
        return out or ([target] if target is not None else [])

    def cycles(self) -> list[list[str]]:
        """The import circles: each strongly connected set of more than one module (Tarjan's)."""
        index: dict[Path, int] = {}
        low: dict[Path, int] = {}
        stack: list[Path] = []
        on: set[Path] = set()
        found: list[list[str]] = []
        for start in self.files:
            if start in index:
                continue
            work = [(start, iter(sorted(self.edges[start])))]
            index[start] = low[start] = len(index)
            stack.append(start)
            on.add(start)
            while work:
                node, children = work[-1]
                for child in children:
                    if child not in index:
                        index[child] = low[child] = len(index)
                        stack.append(child)
                        on.add(child)
                        work.append((child, iter(sorted(self.edges[child]))))
                        break
                    if child in on:
                        low[node] = min(low[node], index[child])
                else:
                    work.pop()
                    if work:
                        low[work[-1][0]] = min(low[work[-1][0]], low[node])
                    if low[node] == index[node]:
                        members = []
                        while True:
                            member = stack.pop()
                            on.discard(member)
                            members.append(rel(self.root, member))
                            if member == node:
                                break
                        if len(members) > 1:
                            found.append(sorted(members))
        return sorted(found)

    def wing_problems(self) -> list[str]:
        """Imports across the house's walls (FORBIDDEN): the product into the checks or the lab, the checks
        into the lab."""
        bad = []
        for f in self.files:
            name = rel(self.root, f)
            for importer, forbidden in FORBIDDEN:
                if not name.startswith(importer):
                    continue
                for target in sorted(self.edges[f]):
                    if rel(self.root, target).startswith(forbidden):
                        bad.append(f"{name} imports {rel(self.root, target)}")
        return bad

    def path_reaches(self) -> list[str]:
        """Imports that name a repository module no project installs: they work only through a path
        someone set (sys.path, PYTHONPATH, pytest's rootdir)."""
        return [
            f"{rel(self.root, f)} imports {m}, which no pyproject.toml installs ({self.stems[m]})"
            for f in self.files
            for m in sorted(self.by_path[f])
        ]


def long_modules(root: Path, files: Iterable[Path], limit: int = LIMIT) -> list[str]:
    out = []
    for f in files:
        count = len(f.read_bytes().splitlines())
        if count > limit:
            out.append(f"{rel(root, f)}: {count} lines")
    return out


# --- README's layout -----------------------------------------------------------------------------------


def layout_folders(readme: str) -> list[str]:
    """The folders README's layout names: the first word of each line of the ```text block under
    "## Layout", each ending in "/"."""
    lines = readme.splitlines()
    try:
        start = lines.index("## Layout")
        fence = lines.index("```text", start)
        end = lines.index("```", fence + 1)
    except ValueError:
        raise AssertionError("README.md has no ```text block under '## Layout'") from None
    out = []
    for line in lines[fence + 1 : end]:
        word = line.split(maxsplit=1)[0] if line.strip() else ""
        if not word.endswith("/"):
            raise AssertionError(f"README.md's layout line {line!r} does not start with a folder (name/)")
        out.append(word.rstrip("/"))
    return out


def layout_problems(readme: str, folders: set[str]) -> list[str]:
    """How README's layout differs from the repository's top-level folders (none: it names each once)."""
    named = layout_folders(readme)
    problems = [f"README's layout does not name {f}/" for f in sorted(folders - set(named))]
    problems += [
        f"README's layout names {f}/, which the repository has not" for f in sorted(set(named) - folders)
    ]
    problems += [
        f"README's layout names {f}/ twice" for f in sorted({f for f in named if named.count(f) > 1})
    ]
    return problems
