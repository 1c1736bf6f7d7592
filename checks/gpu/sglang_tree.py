"""Import SGLang's kernel and backend modules from an unpacked, patched wheel tree.

The GPU checks call SGLang's own Triton kernels and the patched backend methods on a machine that
has torch and triton but no SGLang install and no network. `import sglang` would run the package's
heavy `__init__` (HF patches, the frontend language, every client), so this module registers a bare
`sglang` package whose `__path__` is the tree's `sglang/` directory instead, and answers imports of
third-party packages that are missing on the machine with inert placeholder modules: SGLang's
utilities import them at module level, the kernels and backend code paths under test never call them.
A placeholder that does get called raises, naming the missing package, so a stub can never stand in
for real behaviour silently. Test code only; nothing here ships.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import types
from pathlib import Path

# The launcher's content manifest (standard library only), as installed beside the tree's dependencies:
# the kernel checks run from a copy outside any checkout (the flake's sandbox has only the copy).
from exactlaunch import manifest

TREE_ENV = "BITEXACT_SGLANG_TREE"
MARKER = Path("sglang") / "srt" / "bitexact_patches.py"

# Third-party packages that SGLang's module-level imports reach on the way to the attention backend
# and batch_invariant_ops. Each is placeheld only if it is not installed; installed ones are real.
PLACEHELD = frozenset(
    {
        "aiohttp",
        "sentencepiece",
        "IPython",
        "blobfile",
        "compressed_tensors",
        "cuda",
        "decord",
        "einops",
        "fastapi",
        "flashinfer",
        "gguf",
        "hf_transfer",
        "interegular",
        "llguidance",
        "modelscope",
        "openai",
        "orjson",
        "outlines",
        "partial_json_parser",
        "pybase64",
        "pynvml",
        "setproctitle",
        "sgl_kernel",
        "starlette",
        "tiktoken",
        "uvicorn",
        "uvloop",
        "xgrammar",
        "zmq",
    }
)


# For the scripts that run or compile kernels on a CPU only (the interpreter's, lab/kernels/
# ptx_resources.py): SGLang's image and process utilities (sglang/srt/utils/common.py),
# on the way to the GDN chunk kernels. Not placeheld on a card: transformers takes a module it can find
# for an installed package and reads its version (a placeheld torchvision ends in "Invalid version").
CPU_PLACEHELD = frozenset({"PIL", "psutil", "torchvision"})


class MissingDependency(RuntimeError):
    """A placeholder for a missing package was used for real."""


class _PlaceholderMeta(type):
    def __getattr__(cls, name: str) -> type:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _placeholder(f"{cls.__qualname__}.{name}", cls.__module__)

    def __getitem__(cls, item: object) -> type:
        return cls

    def __or__(cls, other: object) -> type:
        return cls

    def __ror__(cls, other: object) -> type:
        return cls

    def __call__(cls, *args: object, **kwargs: object) -> object:
        raise MissingDependency(
            f"{cls.__module__}.{cls.__qualname__} was called, but {cls.__module__.split('.')[0]!r} is not "
            "installed on this machine (sglang_tree placeholder); carry the real package"
        )


def _any_schema(cls: type, source: object, handler: object) -> object:
    """Lets a placeholder appear in a pydantic model's annotations (SGLang's API models)."""
    from pydantic_core import core_schema

    return core_schema.any_schema()


def _accept_class_keywords(cls: type, **kwargs: object) -> None:
    """Lets SGLang subclass a placeholder with class keywords (`class X(Missing, total=False)`)."""


def _placeholder(qualname: str, module: str) -> type:
    namespace = {
        "__module__": module,
        "__get_pydantic_core_schema__": classmethod(_any_schema),
        "__init_subclass__": _accept_class_keywords,
    }
    cls = _PlaceholderMeta(qualname.rsplit(".", 1)[-1], (), namespace)
    cls.__qualname__ = qualname
    return cls


class _PlaceholderModule(types.ModuleType):
    def __getattr__(self, name: str) -> object:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        value = _placeholder(name, self.__name__)
        setattr(self, name, value)
        return value


class _PlaceholderLoader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = _PlaceholderModule(spec.name)
        module.__path__ = []  # a package, so `import missing.sub` resolves too
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        return None


class _PlaceholderFinder(importlib.abc.MetaPathFinder):
    """Last on sys.meta_path: only names no real finder could resolve reach it."""

    def __init__(self, names: frozenset[str]) -> None:
        self.names = names
        self.loader = _PlaceholderLoader()
        self.used: set[str] = set()

    def find_spec(self, fullname: str, path: object = None, target: object = None):  # noqa: ANN201
        if fullname.split(".")[0] not in self.names:
            return None
        self.used.add(fullname)
        return importlib.machinery.ModuleSpec(fullname, self.loader, is_package=True)


_FINDER: _PlaceholderFinder | None = None


def tree_from_env() -> Path | None:
    value = os.environ.get(TREE_ENV)
    return Path(value) if value else None


def tree_problem(tree: Path | None) -> str | None:
    """Why `tree` cannot be used, or None when it is an unpacked, patched sglang tree."""
    if tree is None:
        return f"{TREE_ENV} is not set (point it at an unpacked, patched sglang site-packages tree)"
    if not (tree / "sglang" / "srt").is_dir():
        return f"{TREE_ENV}={tree} holds no sglang/srt directory"
    if not (tree / MARKER).is_file():
        return f"{TREE_ENV}={tree} lacks {MARKER}: apply patches/sglang/*.patch with patch -p2 first"
    # The files must be what the series the manifest names produced (a subset of the series is fine
    # for kernel checks, when the manifest was written for that subset).
    problems = manifest.verify(tree)
    if problems:
        return f"{TREE_ENV}={tree}: " + "; ".join(problems)
    return None


def install_from_env(cpu_only: bool = False) -> str | None:
    """For scripts: install the tree $BITEXACT_SGLANG_TREE names, or say why it cannot be used.
    `cpu_only`: a script that never runs a kernel on a card also placeholds CPU_PLACEHELD."""
    tree = tree_from_env()
    problem = tree_problem(tree)
    if problem is None and tree is not None:
        _mount(tree, CPU_PLACEHELD if cpu_only else frozenset())
    return problem


def install_for_interpreter() -> str | None:
    """For the CPU interpreter scripts: TRITON_INTERPRET=1 is set and the tree is installed, or why not."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        return "set TRITON_INTERPRET=1 (this runs the kernels on the CPU)"
    return install_from_env(cpu_only=True)


def install(tree: Path) -> None:
    """Make `import sglang.<module>` load from `tree` without running sglang/__init__.py."""
    problem = tree_problem(tree)
    if problem:
        raise RuntimeError(problem)
    _mount(tree)


def _mount(tree: Path, extra: frozenset[str] = frozenset()) -> None:
    global _FINDER
    package_dir = (tree / "sglang").resolve()
    existing = sys.modules.get("sglang")
    if existing is not None:
        if list(getattr(existing, "__path__", [])) != [str(package_dir)]:
            raise RuntimeError(f"another sglang is already imported from {existing.__path__}")
        return
    package = types.ModuleType("sglang")
    package.__path__ = [str(package_dir)]
    package.__file__ = str(package_dir / "__init__.py")
    package.__package__ = "sglang"
    package.__spec__ = importlib.machinery.ModuleSpec("sglang", None, is_package=True)
    package.__spec__.submodule_search_locations = package.__path__
    sys.modules["sglang"] = package
    if _FINDER is None:
        missing = frozenset(name for name in PLACEHELD | extra if importlib.util.find_spec(name) is None)
        _FINDER = _PlaceholderFinder(missing)
        sys.meta_path.append(_FINDER)


def placeheld_modules() -> list[str]:
    """The modules that were answered with placeholders so far (for test reports)."""
    return sorted(_FINDER.used) if _FINDER else []
