"""The house's rules, read from a repository's own files: its Python modules and the imports between
them (by AST, resolved to files of the repository), module sizes, the product's imports of the lab,
README's layout block, and `sys.path` edits. test_house.py holds the repository to them, and shows each
rule failing on a tree built to break it.

Which file an import names: a module under a package root (`pkgs/*/src`, `images/*/src`) or in a package of
its own beside flat modules (`checks/offline/checkhelpers`) by its dotted name, as installed; any other module
(the flat test and lab folders) by its file name, found in its own folder or in a folder that a `sys.path`
edit names: its own, a `conftest.py`'s of its folder or one above (pytest loads those first), or a module's it
imports. An import that names no file of the repository (the standard library, a third-party package) is no
edge.
"""

from __future__ import annotations

import ast
import functools
import os
import subprocess
from collections.abc import Iterable, Iterator
from pathlib import Path

LIMIT = 700  # lines a module may have
SKIPPED = ("docs/evidence/", ".cache/", ".venv/")  # recorded results and local caches, not the house
PACKAGE_ROOTS = ("pkgs/*/src", "images/*/src")
PACKAGE_DIRS = ("checks/offline/checkhelpers",)  # a package beside flat modules (the tests)
PRODUCT = ("pkgs/", "images/", "nix/")
LAB_AND_TEST_HELPERS = ("lab/", "checks/offline/")
LAB_PACKAGE = "lab"  # the lab's import package, lab/ itself (run as `python -m lab.<folder>.<module>`)


def rel(root: Path, path: Path) -> str:
    return path.relative_to(root).as_posix()


def python_files(root: Path) -> list[Path]:
    """The repository's Python modules: what git tracks or would track (a tree without git: every .py
    file), less SKIPPED."""
    if (root / ".git").exists():
        listed = subprocess.run(
            ["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard", "*.py"],
            capture_output=True,
            check=True,
        ).stdout
        names = sorted({n for n in os.fsdecode(listed).split("\0") if n})
    else:
        names = sorted(rel(root, Path(d) / f) for d, _, fs in os.walk(root) for f in fs if f.endswith(".py"))
    return [root / n for n in names if not n.startswith(SKIPPED) and (root / n).is_file()]


def top_folders(root: Path) -> set[str]:
    """The folders at the top of what git tracks."""
    listed = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-z"], capture_output=True, check=True
    ).stdout
    return {n.split("/", 1)[0] for n in os.fsdecode(listed).split("\0") if "/" in n}


# --- sys.path edits ------------------------------------------------------------------------------------


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


class _Paths:
    """Evaluates the path expressions `sys.path` edits use (`Path(__file__).resolve().parents[1] / "x"`,
    names bound to such at module level, lists and comprehensions of them) without running the module;
    what it cannot evaluate is None."""

    def __init__(self, path: Path, tree: ast.Module, depth: int = 0) -> None:
        self.path = path
        self.names: dict[str, object] = {}
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and not node.level and node.module and depth < 3:
                beside = path.parent / f"{node.module}.py"  # a path a module beside it computes
                if beside.is_file():
                    other = _names_of(beside, depth + 1)
                    self.names.update(
                        {a.asname or a.name: other[a.name] for a in node.names if a.name in other}
                    )
            if (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
            ):
                value = self.value(node.value)
                if value is not None:
                    self.names[node.targets[0].id] = value

    def value(self, node: ast.AST, local: dict[str, object] | None = None) -> object:
        names = {**self.names, **(local or {})}
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name):
            return self.path if node.id == "__file__" else names.get(node.id)
        if isinstance(node, (ast.List, ast.Tuple)):
            items = [self.value(e, local) for e in node.elts]
            return None if any(i is None for i in items) else items
        if isinstance(node, ast.ListComp) and len(node.generators) == 1:
            gen = node.generators[0]
            over = self.value(gen.iter, local)
            if not isinstance(over, list) or not isinstance(gen.target, ast.Name) or gen.ifs:
                return None
            items = [self.value(node.elt, {**(local or {}), gen.target.id: item}) for item in over]
            return None if any(i is None for i in items) else items
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            left, right = self.value(node.left, local), self.value(node.right, local)
            return left / right if isinstance(left, Path) and isinstance(right, str) else None
        if isinstance(node, ast.Attribute):
            base = self.value(node.value, local)
            if isinstance(base, Path) and node.attr == "parent":
                return base.parent
            return base if isinstance(base, Path) and node.attr == "parents" else None
        if isinstance(node, ast.Subscript) and getattr(node.value, "attr", None) == "parents":
            base = self.value(node.value, local)
            index = node.slice.value if isinstance(node.slice, ast.Constant) else None
            return base.parents[index] if isinstance(base, Path) and isinstance(index, int) else None
        if isinstance(node, ast.Call):
            return self._call(node, local)
        return None

    def _call(self, node: ast.Call, local: dict[str, object] | None) -> object:
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        if name in ("resolve", "absolute") and isinstance(func, ast.Attribute) and not node.args:
            return self.value(func.value, local)
        if name in ("str", "Path", "fspath", "abspath", "realpath") and len(node.args) == 1:
            value = self.value(node.args[0], local)
            return Path(value) if isinstance(value, str) and name == "Path" else value
        if name == "dirname" and len(node.args) == 1:
            value = self.value(node.args[0], local)
            return value.parent if isinstance(value, Path) else None
        return None

    def folders(self, edit: ast.AST) -> list[Path]:
        """The folders an edit puts on `sys.path`, those that can be read from the source."""
        if isinstance(edit, ast.Call):
            args = edit.args[1:] if getattr(edit.func, "attr", "") == "insert" else edit.args
            values = [self.value(a) for a in args]
        else:
            values = [self.value(getattr(edit, "value", None) or ast.Constant(None))]
        out: list[Path] = []
        for value in values:
            for item in value if isinstance(value, list) else [value]:
                if isinstance(item, Path):
                    out.append(Path(os.path.normpath(item)))
        return out


def _parse(path: Path) -> ast.Module:
    stat = path.stat()
    return _parse_version(path, stat.st_mtime_ns, stat.st_size)


@functools.cache
def _parse_version(path: Path, mtime_ns: int, size: int) -> ast.Module:
    return ast.parse(path.read_bytes(), filename=str(path))


def _names_of(path: Path, depth: int) -> dict[str, object]:
    stat = path.stat()
    return _names_of_version(path, depth, stat.st_mtime_ns, stat.st_size)


@functools.cache
def _names_of_version(path: Path, depth: int, mtime_ns: int, size: int) -> dict[str, object]:
    return _Paths(path, _parse(path), depth).names


def sys_path_editors(root: Path, files: Iterable[Path]) -> set[str]:
    """The modules (relative paths) that edit `sys.path`."""
    return {rel(root, f) for f in files if sys_path_edits(_parse(f))}


# --- the import graph ----------------------------------------------------------------------------------


def package_roots(root: Path) -> list[Path]:
    return sorted(p for pattern in PACKAGE_ROOTS for p in root.glob(pattern) if p.is_dir())


def _imports(tree: ast.Module) -> Iterator[tuple[int, str, list[str]]]:
    """(level, module, names) of every import in the module, deferred ones included."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield 0, alias.name, []
        elif isinstance(node, ast.ImportFrom):
            yield node.level, node.module or "", [a.name for a in node.names]


def _module_file(folder: Path, dotted: str) -> Path | None:
    base = folder.joinpath(*dotted.split("."))
    for candidate in (base.with_name(base.name + ".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


class Graph:
    """The repository's modules and the imports between them that resolve to its files."""

    def __init__(self, root: Path, files: Iterable[Path]) -> None:
        self.root = root.resolve()
        self.files = [f.resolve() for f in files]
        self.roots = [r.resolve() for r in package_roots(root)]
        self.package_dirs = [d.resolve() for d in (root / p for p in PACKAGE_DIRS) if d.is_dir()]
        self._trees = {f: _parse(f) for f in self.files}
        self._imported = {f: list(_imports(tree)) for f, tree in self._trees.items()}
        self._edited: dict[Path, list[Path]] = {}
        self._found: dict[tuple[Path, str], Path | None] = {}
        self.edges: dict[Path, set[Path]] = {f: set() for f in self.files}
        known = set(self.files)
        self._through: dict[Path, list[Path]] = {f: [] for f in self.files}
        for _ in range(3):  # then through the edits of the modules each imports (they ran first)
            for f in self.files:
                self.edges[f] |= {t for t in self._targets(f) if t in known and t != f}
            for f in self.files:
                self._through[f] = [d for t in sorted(self.edges[f]) for d in self._edit_folders(t)]
        self.unresolved: dict[Path, set[str]] = {f: set(self._unresolved(f)) for f in self.files}

    def _edit_folders(self, path: Path) -> list[Path]:
        if path not in self._edited:
            tree = self._trees.get(path) or _parse(path)
            evaluator = _Paths(path, tree)
            self._edited[path] = [d for e in sys_path_edits(tree) for d in evaluator.folders(e)]
        return self._edited[path]

    @functools.cache  # noqa: B019  (one Graph per run)
    def _package_of(self, path: Path) -> tuple[Path, str] | None:
        for r in [*self.roots, *(d.parent for d in self.package_dirs if path.is_relative_to(d))]:
            if path.is_relative_to(r):
                parts = list(path.relative_to(r).with_suffix("").parts)
                if parts[-1] == "__init__":
                    parts.pop()
                return r, ".".join(parts)
        return None

    def search_folders(self, path: Path) -> list[Path]:
        """Where a flat import of this module is looked for: its folder, the folders its own `sys.path`
        edits name, then those of the `conftest.py` files of its folder and the folders above, then those
        of the modules it imports."""
        return self._own_folders(path) + self._through.get(path, [])

    @functools.cache  # noqa: B019  (one Graph per run)
    def _own_folders(self, path: Path) -> list[Path]:
        folders = [path.parent, *self._edit_folders(path)]
        for above in [path.parent, *path.parent.parents]:
            if not above.is_relative_to(self.root):
                break
            conftest = above / "conftest.py"
            if conftest.is_file() and conftest != path:
                folders += self._edit_folders(conftest)
        return folders

    def _resolve(self, path: Path, level: int, module: str, names: list[str]) -> list[Path]:
        if level:
            package = self._package_of(path)
            if package is None:
                return []
            proot, dotted = package
            parts = dotted.split(".") if dotted else []
            if path.name != "__init__.py":
                parts = parts[:-1]
            parts = parts[: len(parts) - (level - 1)] if level > 1 else parts
            full = ".".join([*parts, *([module] if module else [])])
            return self._in(proot, full, names)
        own = self._package_of(path)
        folders = self._edit_folders(path) if own else self.search_folders(path)
        for folder in [*folders, *self.roots]:
            found = self._in(folder, module, names)
            if found:
                return found
        for package in self.package_dirs:  # found only by the package's name
            if module.split(".")[0] == package.name:
                return self._in(package.parent, module, names)
        return []

    def _module_file(self, folder: Path, dotted: str) -> Path | None:
        key = (folder, dotted)
        if key not in self._found:
            self._found[key] = _module_file(folder, dotted)
        return self._found[key]

    def _in(self, folder: Path, dotted: str, names: list[str]) -> list[Path]:
        target = self._module_file(folder, dotted) if dotted else None
        if dotted and target is None:
            return []
        out = []
        for name in names:  # `from package import submodule` names the submodule's file
            sub = self._module_file(folder, f"{dotted}.{name}" if dotted else name)
            if sub is not None:
                out.append(sub)
            elif target is not None:
                out.append(target)
        return out or ([target] if target is not None else [])

    def _targets(self, path: Path) -> Iterator[Path]:
        for level, module, names in self._imported[path]:
            yield from (t.resolve() for t in self._resolve(path, level, module, names))

    def _unresolved(self, path: Path) -> Iterator[str]:
        for level, module, names in self._imported[path]:
            if not level and module and not self._resolve(path, level, module, names):
                yield module.split(".")[0]

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

    def flat_modules(self, prefixes: tuple[str, ...]) -> dict[str, list[str]]:
        """The modules under these folders by the name a flat import gives them."""
        out: dict[str, list[str]] = {}
        for f in self.files:
            name = rel(self.root, f)
            if name.startswith(prefixes) and self._package_of(f) is None:
                out.setdefault(f.stem, []).append(name)
        return out

    def product_imports_of_lab(self) -> list[str]:
        """Imports from the product (PRODUCT) that reach the lab or the test helpers
        (LAB_AND_TEST_HELPERS): an edge into them, or an import that names no file of the product but
        does name one of theirs (a module that counts on someone's PYTHONPATH), or the lab's package."""
        lab = self.flat_modules(LAB_AND_TEST_HELPERS)
        bad = []
        for f in self.files:
            name = rel(self.root, f)
            if not name.startswith(PRODUCT):
                continue
            for target in sorted(self.edges[f]):
                if rel(self.root, target).startswith(LAB_AND_TEST_HELPERS):
                    bad.append(f"{name} imports {rel(self.root, target)}")
            for module in sorted(self.unresolved[f]):
                if module == LAB_PACKAGE:
                    bad.append(f"{name} imports {module}, the lab's package (lab/)")
                elif module in lab:
                    bad.append(f"{name} imports {module}, which only {', '.join(lab[module])} provides")
        return bad


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


def path_edit_problems(editors: set[str], allowed: set[str]) -> list[str]:
    """A `sys.path` edit outside the allowed files, and an allowed file that no longer edits (the list
    only shrinks)."""
    problems = [
        f"{f} edits sys.path: import what it needs as an installed package" for f in sorted(editors - allowed)
    ]
    problems += [f"{f} no longer edits sys.path: take it off the list" for f in sorted(allowed - editors)]
    return problems
