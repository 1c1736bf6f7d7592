"""The house's rules, held from the repository's own files (house_rules.py reads them): no import circle
among its modules; no module over 700 lines; the product (pkgs/, images/, nix/, patches/) imports neither
the checks (checks/) nor the lab (lab/), and the checks do not import the lab; every import of a
repository module goes through a project that installs it (a pyproject.toml), none through a path; no
`sys.path` edit and no pytest `pythonpath` setting anywhere; README's layout names exactly the top-level
folders. Each rule is also run on a small tree built to break it, so that none can pass by finding nothing.

The rules over the whole repository read what git tracks: they carry the `repository` marker (the offline
flake check's source is a part of the tree, without git); the broken trees need nothing."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from checkhelpers import house_rules as house

REPO = Path(__file__).resolve().parents[2]

# Projects as the repository declares them: a src layout, a package that is its own folder, flat modules.
SRC_PROJECT = '[project]\nname = "one"\n\n[tool.setuptools.packages.find]\nwhere = ["src"]\n'
HELPERS_PROJECT = '[project]\nname = "helpers"\n\n[tool.setuptools]\npackages = ["helpers"]\n'
LAB_PROJECT = (
    '[project]\nname = "lab"\n\n[tool.setuptools]\npackage-dir = { lab = "." }\npackages = ["lab"]\n'
)
FLAT_PROJECT = '[project]\nname = "harness"\n\n[tool.setuptools]\npy-modules = ["rig"]\n'


def plant(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def graph_of(root: Path) -> house.Graph:
    return house.Graph(root, house.python_files(root))


# --- the repository -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def files() -> list[Path]:
    return house.python_files(REPO)


@pytest.fixture(scope="module")
def graph(files: list[Path]) -> house.Graph:
    return house.Graph(REPO, files)


@pytest.mark.repository
def test_the_repository_has_no_import_circle(graph: house.Graph) -> None:
    assert sum(len(e) for e in graph.edges.values()) > 900, "the graph found few imports: is it reading them?"
    assert graph.cycles() == []


@pytest.mark.repository
def test_no_module_is_over_the_limit(files: list[Path]) -> None:
    assert len(files) > 100
    assert house.long_modules(REPO, files) == []


@pytest.mark.repository
def test_neither_the_product_nor_the_checks_import_what_they_must_not(graph: house.Graph) -> None:
    lab_users = [
        f for f, targets in graph.edges.items() if any(t.is_relative_to(REPO / "lab") for t in targets)
    ]
    assert lab_users, (
        "nothing imports the lab at all: is the graph resolving lab.* through lab/pyproject.toml?"
    )
    assert graph.wing_problems() == []


@pytest.mark.repository
def test_every_import_of_a_repository_module_goes_through_an_installed_project(graph: house.Graph) -> None:
    assert graph.path_reaches() == []


@pytest.mark.repository
def test_no_module_edits_sys_path_and_no_pytest_setting_adds_to_it(files: list[Path]) -> None:
    assert house.sys_path_editors(REPO, files) == []
    assert house.pytest_pythonpath_settings(REPO) == []


@pytest.mark.repository
def test_the_readme_layout_names_the_top_level_folders() -> None:
    assert house.layout_problems((REPO / "README.md").read_text(), house.top_folders(REPO)) == []


# --- each rule on a tree that breaks it ---------------------------------------------------------------


def test_a_circle_is_found_through_each_kind_of_project_and_deferred_imports(tmp_path: Path) -> None:
    plant(
        tmp_path,
        {
            "pkgs/one/pyproject.toml": SRC_PROJECT,
            "pkgs/one/src/pone/__init__.py": "",
            "pkgs/one/src/pone/recipe.py": "def load():\n    from pone import variants\n",
            "pkgs/one/src/pone/variants.py": "from . import recipe\n",
            "pkgs/one/src/pone/leaf.py": "import json\nfrom pone.recipe import load\n",
            "checks/offline/pyproject.toml": HELPERS_PROJECT,
            "checks/offline/helpers/__init__.py": "",
            "checks/offline/helpers/a.py": "from helpers import b\n",
            "checks/offline/helpers/b.py": "from helpers.a import x\n",
            "checks/offline/test_c.py": "from helpers import a\nimport pone.leaf\n",
            "lab/pyproject.toml": LAB_PROJECT,
            "lab/__init__.py": "",
            "lab/perf/__init__.py": "",
            "lab/perf/run.py": "from lab.perf import measure\n",
            "lab/perf/measure.py": "def f():\n    from .run import main\n",
        },
    )
    graph = graph_of(tmp_path)
    assert graph.cycles() == [
        ["checks/offline/helpers/a.py", "checks/offline/helpers/b.py"],
        ["lab/perf/measure.py", "lab/perf/run.py"],
        ["pkgs/one/src/pone/recipe.py", "pkgs/one/src/pone/variants.py"],
    ]
    assert graph.path_reaches() == []
    (tmp_path / "pkgs/one/src/pone/recipe.py").write_text("def load():\n    return 1\n")
    (tmp_path / "checks/offline/helpers/b.py").write_text("x = 1\n")
    (tmp_path / "lab/perf/measure.py").write_text("x = 1\n")
    assert graph_of(tmp_path).cycles() == []


def test_a_module_over_the_limit_is_named(tmp_path: Path) -> None:
    plant(
        tmp_path,
        {"lab/long.py": "x = 1\n" * 701, "lab/full.py": "x = 1\n" * 700, ".venv/big.py": "x\n" * 900},
    )
    assert house.long_modules(tmp_path, house.python_files(tmp_path)) == ["lab/long.py: 701 lines"]


def test_imports_across_the_walls_are_named(tmp_path: Path) -> None:
    plant(
        tmp_path,
        {
            "pkgs/p/pyproject.toml": SRC_PROJECT,
            "pkgs/p/src/pp/__init__.py": "",
            "pkgs/p/src/pp/fine.py": "from pp import other\nimport rig\n",
            "pkgs/p/src/pp/other.py": "import json\n",
            "pkgs/p/src/pp/lab_user.py": "def f():\n    from lab.perf import perf_model\n",
            "images/e/src/ent/helped.py": "from helpers import servers\n",
            "lab/pyproject.toml": LAB_PROJECT,
            "lab/__init__.py": "",
            "lab/perf/__init__.py": "",
            "lab/perf/perf_model.py": "import rig\nfrom helpers import servers\n",
            "checks/offline/pyproject.toml": HELPERS_PROJECT,
            "checks/offline/helpers/__init__.py": "",
            "checks/offline/helpers/servers.py": "",
            "checks/offline/test_lab.py": "import lab.perf.perf_model\n",
            "checks/gpu/pyproject.toml": FLAT_PROJECT,
            "checks/gpu/rig.py": "",
        },
    )
    assert graph_of(tmp_path).wing_problems() == [
        "checks/offline/test_lab.py imports lab/perf/perf_model.py",
        "images/e/src/ent/helped.py imports checks/offline/helpers/servers.py",
        "pkgs/p/src/pp/fine.py imports checks/gpu/rig.py",
        "pkgs/p/src/pp/lab_user.py imports lab/perf/perf_model.py",
    ]


def test_a_module_reached_by_a_path_is_named_until_a_project_installs_it(tmp_path: Path) -> None:
    plant(
        tmp_path,
        {
            "checks/gpu/rig.py": "",
            "checks/gpu/test_rig.py": "import rig\nimport json\nimport http.client\n",
            "checks/offline/test_other.py": "from rig import x\n",
            # a module inside a package is not reachable flat, and the standard library's names are its
            "pkgs/p/src/pp/__init__.py": "",
            "pkgs/p/src/pp/http.py": "",
            "checks/offline/json.py": "",
        },
    )
    assert graph_of(tmp_path).path_reaches() == [
        "checks/gpu/test_rig.py imports rig, which no pyproject.toml installs (checks/gpu/rig.py)",
        "checks/offline/test_other.py imports rig, which no pyproject.toml installs (checks/gpu/rig.py)",
    ]
    (tmp_path / "checks/gpu/pyproject.toml").write_text(FLAT_PROJECT)
    graph = graph_of(tmp_path)
    assert graph.path_reaches() == []
    assert graph.edges[(tmp_path / "checks/offline/test_other.py").resolve()] == {
        (tmp_path / "checks/gpu/rig.py").resolve()
    }


LAYOUT = "# R\n\n## Layout\n\n```text\nlab/     the lab\ndocs/      pages\n```\n"


def test_a_readme_layout_that_lacks_or_invents_a_folder_is_named() -> None:
    assert house.layout_problems(LAYOUT, {"lab", "docs"}) == []
    assert house.layout_problems(LAYOUT, {"lab", "docs", "pkgs"}) == ["README's layout does not name pkgs/"]
    assert house.layout_problems(LAYOUT, {"lab"}) == [
        "README's layout names docs/, which the repository has not"
    ]
    with pytest.raises(AssertionError, match="no ```text block under '## Layout'"):
        house.layout_problems("# R\n", {"lab"})


def test_every_sys_path_edit_and_pytest_pythonpath_setting_is_named(tmp_path: Path) -> None:
    plant(
        tmp_path,
        {
            "lab/a.py": "import sys\nsys.path.append('x')\n",
            "lab/b.py": "import sys\n\ndef f():\n    sys.path[:0] = ['y']\n",
            "lab/c.py": "import sys\nprint(sys.path)\ncode = 'import sys; sys.path.insert(0, 1)'\n",
            "checks/offline/d.py": "import sys\nsys.path.insert(0, 'z')\n",
            "pyproject.toml": '[tool.pytest.ini_options]\npythonpath = ["checks"]\n',
            "lab/pytest.ini": "[pytest]\npythonpath = .\n",
            "checks/pyproject.toml": '[tool.pytest.ini_options]\nmarkers = ["x"]\n',
        },
    )
    editors = house.sys_path_editors(tmp_path, house.python_files(tmp_path))
    assert editors == [
        "checks/offline/d.py:2 edits sys.path: import what it needs as an installed package",
        "lab/a.py:2 edits sys.path: import what it needs as an installed package",
        "lab/b.py:4 edits sys.path: import what it needs as an installed package",
    ]
    assert house.pytest_pythonpath_settings(tmp_path) == [
        "pyproject.toml: [tool.pytest.ini_options] pythonpath",
        "lab/pytest.ini: pythonpath",
    ]
