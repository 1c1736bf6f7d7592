"""The house's rules, held from the repository's own files (house_rules.py reads them): no import circle
among its modules, no module over 700 lines, nothing in the product (pkgs/, images/, nix/) importing the
lab (lab/) or the test helpers (checks/offline/), README's layout naming exactly the top-level folders,
and no `sys.path` edit outside the files that make one today (the lab's move takes them out; a new edit
fails). Each rule is also run on a small tree built to break it, so that none can pass by finding nothing.

The rules over the whole repository read what git tracks: they carry the `repository` marker (the offline
flake check's source is a part of the tree, without git); the broken trees need nothing."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from checkhelpers import house_rules as house

REPO = Path(__file__).resolve().parents[2]

# The files that edit sys.path today: the lab's move to installed packages removes these edits, and each
# file leaves this list when its edit goes. No file joins it.
SYS_PATH_EDITS_TO_REMOVE: set[str] = set()


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
    assert sum(len(e) for e in graph.edges.values()) > 500, "the graph found few imports: is it reading them?"
    assert graph.cycles() == []


@pytest.mark.repository
def test_no_module_is_over_the_limit(files: list[Path]) -> None:
    assert len(files) > 100
    assert house.long_modules(REPO, files) == []


@pytest.mark.repository
def test_the_product_imports_neither_the_lab_nor_the_test_helpers(graph: house.Graph) -> None:
    assert graph.product_imports_of_lab() == []


@pytest.mark.repository
def test_the_readme_layout_names_the_top_level_folders() -> None:
    assert house.layout_problems((REPO / "README.md").read_text(), house.top_folders(REPO)) == []


@pytest.mark.repository
def test_only_the_listed_files_edit_sys_path(files: list[Path]) -> None:
    editors = house.sys_path_editors(REPO, files)
    assert house.path_edit_problems(editors, SYS_PATH_EDITS_TO_REMOVE) == []


# --- each rule on a tree that breaks it ---------------------------------------------------------------


def test_a_circle_is_found_through_packages_flat_folders_and_deferred_imports(tmp_path: Path) -> None:
    plant(
        tmp_path,
        {
            "pkgs/one/src/pone/__init__.py": "",
            "pkgs/one/src/pone/recipe.py": "def load():\n    from pone import variants\n",
            "pkgs/one/src/pone/variants.py": "from . import recipe\n",
            "pkgs/one/src/pone/leaf.py": "import json\nfrom pone.recipe import load\n",
            "checks/offline/a_helper.py": "import b_helper\n",
            "checks/offline/b_helper.py": "from a_helper import x\n",
            "checks/offline/test_c.py": "import a_helper\nimport pone.leaf\n",
        },
    )
    graph = graph_of(tmp_path)
    assert graph.cycles() == [
        ["checks/offline/a_helper.py", "checks/offline/b_helper.py"],
        ["pkgs/one/src/pone/recipe.py", "pkgs/one/src/pone/variants.py"],
    ]
    (tmp_path / "pkgs/one/src/pone/recipe.py").write_text("def load():\n    return 1\n")
    (tmp_path / "checks/offline/b_helper.py").write_text("x = 1\n")
    assert graph_of(tmp_path).cycles() == []


def test_a_circle_through_a_folder_a_sys_path_edit_names_is_found(tmp_path: Path) -> None:
    plant(
        tmp_path,
        {
            "checks/offline/conftest.py": (
                "import sys\nfrom pathlib import Path\n"
                'sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "lab" / "perf"))\n'
            ),
            "checks/offline/test_x.py": "import lab_run\n",
            "lab/perf/lab_run.py": (
                "import sys\nfrom pathlib import Path\n"
                "REPO = Path(__file__).resolve().parents[2]\n"
                'sys.path[:0] = [str(REPO / "checks" / "offline")]\n'
                "import test_x\n"
            ),
        },
    )
    assert graph_of(tmp_path).cycles() == [["checks/offline/test_x.py", "lab/perf/lab_run.py"]]


def test_a_module_over_the_limit_is_named(tmp_path: Path) -> None:
    plant(
        tmp_path,
        {"lab/long.py": "x = 1\n" * 701, "lab/full.py": "x = 1\n" * 700, ".venv/big.py": "x\n" * 900},
    )
    assert house.long_modules(tmp_path, house.python_files(tmp_path)) == ["lab/long.py: 701 lines"]


def test_a_product_import_of_the_lab_or_the_test_helpers_is_named(tmp_path: Path) -> None:
    plant(
        tmp_path,
        {
            "pkgs/p/src/pp/__init__.py": "",
            "pkgs/p/src/pp/fine.py": "from pp import other\n",
            "pkgs/p/src/pp/other.py": "import json\n",
            "pkgs/p/src/pp/lab_user.py": (
                "import sys\nfrom pathlib import Path\n"
                'sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "lab" / "perf"))\n'
                "import perf_model\n"
            ),
            "pkgs/p/src/pp/lab_package_user.py": "def f():\n    from lab.perf import perf_model\n",
            "images/e/src/ent/main.py": "import canned_helper\n",
            "lab/__init__.py": "",
            "lab/perf/__init__.py": "",
            "lab/perf/perf_model.py": "",
            "images/e/src/ent/helped.py": "from checkhelpers import servers\n",
            "checks/offline/canned_helper.py": "",
            "checks/offline/checkhelpers/__init__.py": "",
            "checks/offline/checkhelpers/servers.py": "",
        },
    )
    assert graph_of(tmp_path).product_imports_of_lab() == [
        "images/e/src/ent/helped.py imports checks/offline/checkhelpers/servers.py",
        "images/e/src/ent/main.py imports canned_helper, which only checks/offline/canned_helper.py provides",
        "pkgs/p/src/pp/lab_package_user.py imports lab, the lab's package (lab/)",
        "pkgs/p/src/pp/lab_user.py imports lab/perf/perf_model.py",
    ]


LAYOUT = "# R\n\n## Layout\n\n```text\nlab/     the lab\ndocs/      pages\n```\n"


def test_a_readme_layout_that_lacks_or_invents_a_folder_is_named() -> None:
    assert house.layout_problems(LAYOUT, {"lab", "docs"}) == []
    assert house.layout_problems(LAYOUT, {"lab", "docs", "pkgs"}) == ["README's layout does not name pkgs/"]
    assert house.layout_problems(LAYOUT, {"lab"}) == [
        "README's layout names docs/, which the repository has not"
    ]
    with pytest.raises(AssertionError, match="no ```text block under '## Layout'"):
        house.layout_problems("# R\n", {"lab"})


def test_a_new_sys_path_edit_fails_and_a_removed_one_leaves_the_list(tmp_path: Path) -> None:
    plant(
        tmp_path,
        {
            "lab/a.py": "import sys\nsys.path.append('x')\n",
            "lab/b.py": "import sys\n\ndef f():\n    sys.path[:0] = ['y']\n",
            "lab/c.py": "import sys\nprint(sys.path)\ncode = 'import sys; sys.path.insert(0, 1)'\n",
            "checks/offline/d.py": "import sys\nsys.path.insert(0, 'z')\n",
        },
    )
    editors = house.sys_path_editors(tmp_path, house.python_files(tmp_path))
    assert editors == {"lab/a.py", "lab/b.py", "checks/offline/d.py"}
    assert house.path_edit_problems(editors, {"lab/a.py", "lab/b.py", "lab/c.py"}) == [
        "checks/offline/d.py edits sys.path: import what it needs as an installed package",
        "lab/c.py no longer edits sys.path: take it off the list",
    ]
