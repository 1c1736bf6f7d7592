"""This checkout's product (and, for the kernel benches, the kernel checks' harness) copied into a deps
folder on a GPU host without Nix and without a build backend, so that the lab's programs run there with
that folder as their only PYTHONPATH, beside the SGLang tree under test. It imports nothing of the product:
it is what makes the product importable there.

    python -m lab.card.product DEPS              # the product's packages (assemble.py build does this too)
    python -m lab.card.product --harness DEPS    # and checks/gpu's harness modules (lab/kernels' benches)
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HARNESS = REPO / "checks" / "gpu"

# The project's own packages the GPU host runs (pure Python, no entry point used): the file reader they
# share (exactformats), gpuhost (the driver and cards), the launcher, bitexact, and the runner, each
# {package folder under src/: its project}.
PRODUCT = {
    "exactformats": "pkgs/formats",
    "exactlaunch": "pkgs/server",
    "gpuhost": "pkgs/gpuhost",
    "bitexact": "pkgs/bitexact",
    "gpuchecks": "pkgs/gpu-checks",
}


class ProductError(Exception):
    pass


def install_product(deps: Path) -> None:
    """This checkout's packages into `deps` on every call, never a stale copy from an earlier call: copied
    as they are (pure Python; the host needs no build backend), the previous copy removed first. They run
    as `python -m gpuchecks`, `python -m bitexact` and `python -m exactlaunch.cli`."""
    for package, project in PRODUCT.items():
        dest = deps / package
        if dest.exists():
            shutil.rmtree(dest)
        shutil.copytree(REPO / project / "src" / package, dest, ignore=shutil.ignore_patterns("__pycache__"))


def harness_modules(pyproject: Path = HARNESS / "pyproject.toml") -> list[str]:
    """The flat modules checks/gpu's project installs (its `py-modules`), as its pyproject lists them."""
    try:
        modules = tomllib.loads(pyproject.read_text())["tool"]["setuptools"]["py-modules"]
    except (OSError, tomllib.TOMLDecodeError, KeyError) as error:
        raise ProductError(
            f"{pyproject}: no [tool.setuptools] py-modules to copy ({type(error).__name__}: {error}); "
            "the kernel checks' harness is installed from that list"
        ) from None
    missing = [m for m in modules if not (pyproject.parent / f"{m}.py").is_file()]
    if missing:
        raise ProductError(f"{pyproject} lists {', '.join(missing)}, which {pyproject.parent} does not hold")
    return list(modules)


def install_harness(deps: Path) -> None:
    """checks/gpu's harness modules into `deps`, as installed flat modules (`import sglang_tree`)."""
    deps.mkdir(parents=True, exist_ok=True)
    for module in harness_modules():
        shutil.copyfile(HARNESS / f"{module}.py", deps / f"{module}.py")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("deps", type=Path, help="the folder the host's lab programs get as PYTHONPATH")
    parser.add_argument("--harness", action="store_true", help="checks/gpu's harness modules too")
    args = parser.parse_args(argv)
    args.deps.mkdir(parents=True, exist_ok=True)
    install_product(args.deps)
    if args.harness:
        try:
            install_harness(args.deps)
        except ProductError as error:
            print(f"lab.card.product: {error}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
