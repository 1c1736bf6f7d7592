"""The launcher's values from the environment and the machine, checked where they enter
(exactlaunch.environment.check_caller, exactlaunch.capacity, cli._out), each through the real program:

- a drawn XDG_CACHE_HOME (relative, absolute, empty) never makes a cache depend on the working directory:
  a relative one is ignored as the XDG specification says, and said so;
- a drawn BITEXACT_HF_HUB_CACHE (a folder, a link to one, a relative folder, a file, nothing, a dangling
  link) is refused exactly when it names no folder, naming it; what the server gets is absolute;
- drawn fleets (replicas, GPUs, the weights' size in a hub cache, the card NVML reports) are refused
  exactly when a GPU's share of the recipe's --mem-fraction-static holds less than the weights, saying how
  many fit; the card is the NVML stand-in (driver_standins.py), the weights sparse files;
- stdout closed (`>&-`), full (/dev/full) or a pipe whose reader left: exit 2 with a message on stderr,
  never a silent 0.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from checkhelpers.driver_standins import H100_SXM, MAX_Q, RTX_5090, Card, compiler, install_driver, nvml_env
from checkhelpers.fuzz_settings import fuzz
from exactformats import cache_home
from hypothesis import given
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "nix" / "recipes" / "qwen3.8-27b-exact.json"
DATA = json.loads(RECIPE.read_text())
FRACTION = 0.88  # the recipe's --mem-fraction-static


def launcher(
    args: list[str], env: dict[str, str], cwd: Path, shell_tail: str = ""
) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("BITEXACT_", "SGLANG_", "HF_", "XDG_"))}
    clean.update(HOME=str(cwd / "home"), **env)
    command = [sys.executable, "-m", "exactlaunch.cli", "--recipe", str(RECIPE), *args]
    if shell_tail:
        command = ["sh", "-c", 'exec "$@" ' + shell_tail, "sh", *command]
    return subprocess.run(command, capture_output=True, text=True, env=clean, cwd=cwd, timeout=60)


# --- XDG_CACHE_HOME ------------------------------------------------------------------------------------

xdg_values = st.one_of(
    st.sampled_from(["", "cache", "./cache", "../x", "~/c", "c/d", "/abs/cache", "/"]),
    st.text(
        st.characters(codec="ascii", categories=["L", "N"], include_characters="./_-"), min_size=1, max_size=8
    ),
)


@fuzz(12)
@given(xdg_values)
def test_a_relative_xdg_cache_home_is_ignored_and_said_so(value: str) -> None:
    with tempfile.TemporaryDirectory() as temp:
        cwd = Path(temp)
        done = launcher(
            ["--print"], {"XDG_CACHE_HOME": value, "BITEXACT_DEEP_GEMM": "/nix/store/x-deep-gemm"}, cwd
        )
    assert done.returncode == 0, done.stderr
    cache = json.loads(done.stdout)["env"]["SGLANG_DG_CACHE_DIR"]
    assert os.path.isabs(cache), cache
    if value and not os.path.isabs(value):
        assert cache.startswith(str(cwd / "home" / ".cache") + "/"), cache
        assert f"XDG_CACHE_HOME={value!r} is not an absolute path, and the XDG specification" in done.stderr
    elif value:
        assert cache.startswith(value.rstrip("/") + "/"), cache
        assert "XDG_CACHE_HOME" not in done.stderr
    assert cache_home({"XDG_CACHE_HOME": value, "HOME": "/h"}).is_absolute()


# --- BITEXACT_HF_HUB_CACHE ------------------------------------------------------------------------------

HUB_KINDS = ("folder", "link-to-folder", "relative-folder", "file", "nothing", "dangling", "empty")


def hub_value(kind: str, cwd: Path) -> str:
    (cwd / "hub").mkdir()
    (cwd / "f").write_text("x")
    (cwd / "to-hub").symlink_to(cwd / "hub")
    (cwd / "gone").symlink_to(cwd / "none")
    return {
        "folder": str(cwd / "hub"),
        "link-to-folder": str(cwd / "to-hub"),
        "relative-folder": "hub",
        "file": str(cwd / "f"),
        "nothing": str(cwd / "none"),
        "dangling": str(cwd / "gone"),
        "empty": "",
    }[kind]


@pytest.mark.parametrize("kind", HUB_KINDS)
def test_a_hub_cache_that_names_no_folder_is_refused_by_print_and_start(kind: str, tmp_path: Path) -> None:
    value = hub_value(kind, tmp_path)
    for args in (["--print"], ["--variant", "no-spec"]):  # a start refuses before anything runs
        done = launcher(args, {"BITEXACT_HF_HUB_CACHE": value}, tmp_path)
        if kind in ("file", "nothing", "dangling"):
            assert done.returncode == 2, done.stderr
            assert f"$BITEXACT_HF_HUB_CACHE={value!r} names no folder" in done.stderr, done.stderr
            assert "nix build .#weights -o weights" in done.stderr
        elif args == ["--print"]:
            assert done.returncode == 0, done.stderr
            served = json.loads(done.stdout)["env"].get("HF_HUB_CACHE")
            assert (served is None) if kind == "empty" else (os.path.isabs(served) and os.path.isdir(served))


# --- replicas on one GPU ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if compiler() is None:
        pytest.skip("the driver stand-ins are compiled here; no C compiler")
    return install_driver(tmp_path_factory.mktemp("driver") / "lib")


def hub_with_weights(root: Path, model_mib: int, drafter_mib: int) -> Path:
    """A hub cache holding the recipe's model and drafter at their pinned revisions, as sparse files."""
    for section, mib in (("model", model_mib), ("drafter", drafter_mib)):
        repo, rev = DATA[section]["repo"], DATA[section]["revision"]
        snap = root / ("models--" + repo.replace("/", "--")) / "snapshots" / rev
        snap.mkdir(parents=True)
        with (snap / "model.safetensors").open("wb") as handle:
            handle.truncate(mib << 20)
        (snap / "config.json").write_text("{}")
    return root


@fuzz(12)
@given(
    st.integers(2, 12),
    st.sampled_from(["", "0,1"]),
    st.sampled_from([MAX_Q, H100_SXM, RTX_5090]),
    st.integers(500, 60000),
    st.sampled_from(["recipe", "no-spec"]),
)
def test_replicas_that_do_not_fit_their_gpu_are_refused(
    driver: Path, replicas: int, gpus: str, card: Card, model_mib: int, variant: str
) -> None:
    drafter_mib = 1000
    with tempfile.TemporaryDirectory() as temp:
        cwd = Path(temp)
        hub = hub_with_weights(cwd / "hub", model_mib, drafter_mib)
        env = {"BITEXACT_DRIVER_LIB": str(driver), "BITEXACT_HF_HUB_CACHE": str(hub), **nvml_env(card, card)}
        args = ["--print", "--variant", variant, "--replicas", str(replicas), "--port", "30000"]
        done = launcher([*args, *(["--gpus", gpus] if gpus else [])], env, cwd)
    ids = gpus.split(",") if gpus else ["0"]
    per_gpu = [sum(1 for i in range(replicas) if ids[i % len(ids)] == g) for g in ids]
    weights = (model_mib + drafter_mib if variant == "recipe" else model_mib) << 20
    memory = card.memory_mib << 20
    fits = all(k < 2 or FRACTION / k * memory >= weights for k in per_gpu)
    if fits:
        assert done.returncode == 0, done.stderr
    else:
        assert done.returncode == 2, done.stderr
        most = int(FRACTION * memory // weights)
        assert f"less than the {weights / (1 << 20):.0f} MiB of weights each loads; at most {most} fit" in (
            done.stderr
        ), done.stderr


def test_replicas_are_planned_with_a_note_where_nothing_can_be_measured(tmp_path: Path) -> None:
    done = launcher(["--print", "--replicas", "3", "--port", "30000"], {}, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "3 replicas share GPU 0, each with 0.2933 of its memory; whether the weights fit" in done.stderr


# --- stdout ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("args", [["--print"], ["--list-variants"], ["--build-info"]])
@pytest.mark.parametrize(
    ("tail", "said"),
    [
        (">&-", "stdout is closed, so there is nowhere to print to"),
        ("> /dev/full", "cannot write to stdout: No space left on device"),
    ],
)
def test_an_unwritable_stdout_is_an_error_not_a_silent_success(
    args: list[str], tail: str, said: str, tmp_path: Path
) -> None:
    if tail.endswith("/dev/full") and not Path("/dev/full").exists():
        pytest.skip("no /dev/full")
    done = launcher(args, {}, tmp_path, shell_tail=tail)
    assert done.returncode == 2, done.stderr
    assert said in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_a_pipe_whose_reader_left_is_an_error(tmp_path: Path) -> None:
    read, write = os.pipe()
    os.close(read)
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("BITEXACT_", "SGLANG_", "HF_"))}
    done = subprocess.run(
        [sys.executable, "-m", "exactlaunch.cli", "--recipe", str(RECIPE), "--print"],
        stdout=write, stderr=subprocess.PIPE, text=True, env=clean, timeout=60,
    )  # fmt: skip
    os.close(write)
    assert done.returncode == 2, done.stderr
    assert "cannot write to stdout: Broken pipe" in done.stderr and "Traceback" not in done.stderr
