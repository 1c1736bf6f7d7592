"""exactlaunch: what a recipe says of itself is checked against what it runs.

Found by reviewing the launcher as a new user would: each of these passed `--print` (exit 0) before.
- a variant's `speculative` contradicting its argv (a `no-spec` reference that speculates);
- an argv or a variant loading weights the recipe does not pin (`--model-path` another repo);
- a recipe or variant environment setting what the launcher decides (LD_LIBRARY_PATH: --print showed
  the recipe's, a start the driver's);
- `--flag=value` in the argv, which variants and the fleet do not find by name (the fleet said "the
  recipe sets no --mem-fraction-static");
- the `recipe` variant carrying edits (the default start no longer the recipe as published);
- recipe and variant names that bitexact makes paths of (`../x`), unchecked by the launcher;
- `--host 300.1.1.1` and `--host 30000` taken for host names;
- a dangling link or a loop as --log-dir or the JIT cache: --print passed, a start's mkdir says "File
  exists".
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from checkhelpers.cli_capture import run_main
from exactlaunch import cli, values
from exactlaunch.environment import DECIDED_VARS, build_env
from exactlaunch.recipe import RecipeError, parse_recipe
from gpuhost.driver import DriverLibs, driver_environment

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "nix" / "recipes" / "qwen3.8-27b-exact.json"
SPEC = ["--speculative-algorithm", "--speculative-draft-model-path", "--speculative-num-draft-tokens"]


def _data() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(RECIPE.read_text())
    return data


def _argv_edit(data: dict[str, Any], flag: str, value: str) -> None:
    argv = data["launch"]["argv"]
    argv[argv.index(flag) + 1] = value


def _joined(data: dict[str, Any]) -> None:
    argv = data["launch"]["argv"]
    at = argv.index("--mem-fraction-static")
    argv[at : at + 2] = ["--mem-fraction-static=0.88"]


EDITS: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    (
        "speculative false, argv speculates",
        lambda d: d["variants"].update(x={"speculative": False}),
        r"variant `x` says speculative: false, but its argv keeps --speculative-algorithm",
    ),
    (
        "speculative true, speculation unset",
        lambda d: d["variants"].update(x={"speculative": True, "unset": SPEC}),
        r"variant `x` says speculative: true, but its argv has no --speculative-algorithm",
    ),
    (
        "argv loads another model",
        lambda d: _argv_edit(d, "--model-path", "Qwen/Qwen3.8-32B"),
        r"runs --model-path Qwen/Qwen3.8-32B, but the recipe's `model` pins Qwen/Qwen3.8-27B",
    ),
    (
        "variant sets another drafter",
        lambda d: d["variants"].update(x={"set": {"--speculative-draft-model-path": "a/b"}}),
        r"variant `x` runs --speculative-draft-model-path a/b, but the recipe's `drafter` pins incoai/",
    ),
    (
        "launch env sets LD_LIBRARY_PATH",
        lambda d: d["launch"]["env"].update(LD_LIBRARY_PATH="/opt/lib"),
        r"`launch.env` sets \['LD_LIBRARY_PATH'\]: the launcher decides these itself",
    ),
    (
        "variant env sets SGLANG_DG_CACHE_DIR",
        lambda d: d["variants"].update(x={"env": {"SGLANG_DG_CACHE_DIR": "/c"}}),
        r"`variants.x.env` sets \['SGLANG_DG_CACHE_DIR'\]",
    ),
    (
        "flag=value in the argv",
        _joined,
        r"`launch.argv` holds '--mem-fraction-static=0.88': write a flag and its value as two elements",
    ),
    (
        "the recipe variant edits",
        lambda d: d["variants"]["recipe"].update(set={"--attention-backend": "flashinfer"}),
        r"variant `recipe` edits the argv or the environment; `recipe` is the recipe as published",
    ),
    (
        "a variant name with ../",
        lambda d: d["variants"].update({"../x": {}}),
        r"`variants`: '\.\./x' is not a recipe or variant name",
    ),
    (
        "a recipe name with ../",
        lambda d: d.update(name="../other/x"),
        r"`name`: '\.\./other/x' is not a recipe or variant name",
    ),
    (
        "a variant named after bitexact's preset long",
        lambda d: d["variants"].update(long={"set": {"--context-length": "131072"}}),
        r"variant `long`: the name is bitexact's own preset .* which would shadow it",
    ),
    (
        "a variant name in upper case (bitexact refuses it)",
        lambda d: d["variants"].update(Fast={}),
        r"'Fast' is not a recipe or variant name",
    ),
]


def _run(args: list[str]) -> tuple[int, str, str]:
    return run_main(cli.main, args)


@pytest.mark.parametrize(("what", "edit", "message"), EDITS, ids=[e[0] for e in EDITS])
def test_the_reader_refuses_a_recipe_at_odds_with_itself(
    what: str, edit: Callable[[dict[str, Any]], None], message: str, tmp_path: Path
) -> None:
    data = _data()
    edit(data)
    with pytest.raises(RecipeError, match=message):
        parse_recipe(data, Path("r.json"))
    # --print refuses it too (exit 2), whichever variant is asked for
    (tmp_path / "r.json").write_text(json.dumps(data))
    code, out, err = _run(["--recipe", str(tmp_path / "r.json"), "--variant", "no-spec", "--print"])
    assert code == 2 and not out, (code, out)
    assert "error:" in err and "Traceback" not in err


def test_every_recipe_of_the_checkout_is_consistent() -> None:
    for path in sorted((REPO / "nix" / "recipes").glob("*.json")):
        parse_recipe(json.loads(path.read_text()), path)


def test_a_variant_without_speculative_may_unset_it() -> None:
    """bitexact reads an absent `speculative` as "either": only a given one is held to the argv."""
    data = _data()
    data["variants"]["x"] = {"unset": SPEC}
    parse_recipe(data, Path("r.json"))


def test_names_follow_bitexacts_pattern() -> None:
    from bitexact.names import NAME

    assert values.RECIPE_NAME.pattern == NAME.pattern


def test_bitexact_refuses_a_variant_its_preset_would_shadow(tmp_path: Path) -> None:
    from bitexact.errors import UsageError
    from bitexact.presets import load_recipe

    data = _data()
    data["variants"]["long"] = {}
    (tmp_path / "r.json").write_text(json.dumps(data))
    with pytest.raises(UsageError, match=r"variant `long`: the name is bitexact's own preset"):
        load_recipe(str(tmp_path / "r.json"))


def test_the_decided_variables_are_every_one_the_launcher_sets(tmp_path: Path) -> None:
    caller = {
        "BITEXACT_HF_HUB_CACHE": "/w",
        "BITEXACT_CUDA_HOME": "/c",
        "BITEXACT_DEEP_GEMM": "/d",
        "XDG_CACHE_HOME": str(tmp_path),
    }
    decided = set(build_env(caller, {}).decided)
    libs = DriverLibs(
        directory=tmp_path, found_in=tmp_path, origin="test", libcuda=tmp_path / "libcuda.so.1", nvml=None
    )
    driver, _ = driver_environment(libs, {})
    assert decided | set(driver) == DECIDED_VARS


@pytest.mark.parametrize("text", ["300.1.1.1", "1.2.3.4.5", "30000", "10.0.0.256", "a.1"])
def test_host_refuses_numbers_that_are_no_address(text: str) -> None:
    with pytest.raises(values.BadValue):
        values.host(text)


@pytest.mark.parametrize("text", ["localhost", "host.", "gpu-1.lan", "0.0.0.0", "::1", "1a.example"])
def test_host_takes_names_and_addresses(text: str) -> None:
    assert values.host(text) == text


def _links(tmp_path: Path) -> dict[str, Path]:
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere" / "x")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    return {"dangling": tmp_path / "dangling", "loop": tmp_path / "loop", "below": tmp_path / "loop" / "a"}


def test_folder_to_make_refuses_links_that_lead_nowhere(tmp_path: Path) -> None:
    for name, path in _links(tmp_path).items():
        # what a start would meet: mkdir's "File exists" (or a loop's error), after --print passed
        with pytest.raises(OSError):
            path.mkdir(parents=True, exist_ok=True)
        with pytest.raises(values.BadValue, match=r"is a symbolic link that leads nowhere"):
            values.folder_to_make(path)
        assert name


def test_print_refuses_a_log_dir_or_cache_that_is_a_dangling_link(tmp_path: Path) -> None:
    links = _links(tmp_path)
    fleet = ["--recipe", str(RECIPE), "--replicas", "2", "--port", "30000", "--print"]
    code, _, err = _run([*fleet, "--log-dir", str(links["dangling"])])
    assert code == 2 and "log folder:" in err and "leads nowhere" in err, err
    env = {"XDG_CACHE_HOME": str(links["loop"]), "BITEXACT_DEEP_GEMM": "/nix/store/x-deep-gemm"}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        code, _, err = _run(["--recipe", str(RECIPE), "--print"])
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    assert code == 2 and "SGLANG_DG_CACHE_DIR" in err and "leads nowhere" in err, err


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None, reason="a read-only tmpfs mount needs root"
)
def test_a_read_only_file_system_is_named_as_such(tmp_path: Path) -> None:
    """As root, os.access refuses only a read-only file system: the message said "this user may not
    write"."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    args = f"--recipe {RECIPE} --replicas 2 --port 30000 --log-dir {mnt}/logs --print"
    run = f"mount -t tmpfs -o ro tmpfs {mnt} && {sys.executable} -m exactlaunch.cli {args}"
    done = subprocess.run(["unshare", "-m", "sh", "-c", run], capture_output=True, text=True)
    if "mount:" in done.stderr:
        pytest.skip(f"cannot mount here: {done.stderr.strip()}")
    assert done.returncode == 2, done.stderr
    assert f"{mnt}/logs cannot be made: {mnt} is on a read-only file system" in done.stderr, done.stderr


@pytest.mark.nix  # evaluates nix/lib/recipe.nix with the real Nix, which a build sandbox lacks
@pytest.mark.skipif(shutil.which("nix-instantiate") is None, reason="nix-instantiate not on PATH")
@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ({"name": "../x"}, r'the name "\.\./x" is not a recipe or variant name'),
        ({"variants": {"Bad": {}}}, r'the variant name "Bad" is not a recipe or variant name'),
    ],
)
def test_the_nix_reader_refuses_names_that_become_paths(
    edit: dict[str, Any], message: str, tmp_path: Path
) -> None:
    """nix/gpu-checks.nix reads ./recipes/<name>.json: the name is a path in Nix too, checked with the
    launcher's pattern (held equal here)."""
    nix_text = (REPO / "nix" / "lib" / "recipe.nix").read_text()
    assert f'namePattern = "{values.RECIPE_NAME.pattern}";' in nix_text
    data = {**_data(), **edit}
    (tmp_path / "r.json").write_text(json.dumps(data))
    expr = f"(import {REPO}/nix/lib).recipe.load {tmp_path / 'r.json'}"
    done = subprocess.run(
        ["nix-instantiate", "--eval", "--strict", "--json", "-E", expr], capture_output=True, text=True
    )
    assert done.returncode != 0
    assert re.search(message, done.stderr), done.stderr
