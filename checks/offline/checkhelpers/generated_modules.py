"""Importing a module written at run time. Triton's JIT reads a kernel's source from its file, so the
interpreter checks write the kernels they cut from SGLang's sources to files and import those: each is
loaded from its path under its file's name and entered in sys.modules, so that a later written module's
`from NAME import ...` finds it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path}: not a Python module file (write it with a .py name)")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
