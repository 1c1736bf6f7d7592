"""exactlaunch: recipe -> argv/env per variant, edit semantics, serving-flag allowlist, environment pins.

Expected argv are written out here by hand from the recipe file; the Nix lib's tests do the same, so both
implementations are held to the recipe, not to each other.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from exactlaunch.cli import plan
from exactlaunch.environment import build_env, deep_gemm_cache_key
from exactlaunch.recipe import (
    RecipeError,
    append_serving_flags,
    apply_variant,
    load_recipe,
    parse_recipe,
    set_flag,
    unset_flag,
    variant_named,
)

REPO = Path(__file__).resolve().parents[2]
RECIPE_PATH = REPO / "nix" / "recipes" / "qwen3.8-27b-exact.json"
PY = "/nix/store/example-python/bin/python3.12"

HEAD = [
    PY,
    "-m",
    "sglang.launch_server",
    "--model-path",
    "Qwen/Qwen3.8-27B",
    "--enable-deterministic-inference",
]
SPEC = [
    "--speculative-algorithm",
    "DFLASH",
    "--speculative-draft-model-path",
    "incoai/Qwen3.8-27B-DFlash2",
    "--speculative-num-draft-tokens",
    "8",
]
REST = ["--mamba-ssm-dtype", "float32"]
CAPACITY = ["--mem-fraction-static", "0.88", "--context-length", "262144"]
TAIL = ["--disable-radix-cache"]


def _argv(
    backend: str = "triton",
    spec: bool = True,
    max_running: str = "8",
    chunk: str = "8192",
    graph_bs: str = "",
) -> list[str]:
    return (
        HEAD
        + ["--attention-backend", backend]
        + (SPEC if spec else [])
        + REST
        + ["--max-running-requests", max_running, "--chunked-prefill-size", chunk]
        + CAPACITY
        + TAIL
        # a flag the recipe does not set is appended by the variant
        + (["--cuda-graph-max-bs-decode", graph_bs] if graph_bs else [])
    )


RECIPE_ENV = {"SGLANG_BATCH_INVARIANT_OPS_SMALL_M_TRITON": "16"}
EXPECTED: dict[str, tuple[list[str], dict[str, str]]] = {
    "recipe": (_argv(), RECIPE_ENV),
    "no-spec": (_argv(spec=False), RECIPE_ENV),
    "forced-reject": (
        _argv(),
        {
            **RECIPE_ENV,
            "SGLANG_SIMULATE_ACC_LEN": "1",
            "SGLANG_SIMULATE_ACC_TOKEN_MODE": "real-draft-token",
        },
    ),
    "inflight-8": (_argv(), RECIPE_ENV),
    "max-running-1": (_argv(max_running="1"), RECIPE_ENV),
    "max-seqs-32": (_argv(max_running="32"), RECIPE_ENV),
    "chunked-prefill-4096": (_argv(chunk="4096"), RECIPE_ENV),
    "chunked-prefill-16384": (_argv(chunk="16384"), RECIPE_ENV),
    "cuda-graph-decode-bs-1": (_argv(graph_bs="1"), RECIPE_ENV),
    "cuda-graph-decode-bs-32": (_argv(graph_bs="32"), RECIPE_ENV),
    "backend-flashinfer": (_argv(backend="flashinfer"), RECIPE_ENV),
    # the drafter's context capped: a flag the recipe does not set, appended
    "draft-window-4096": (_argv() + ["--speculative-draft-window-size", "4096"], RECIPE_ENV),
    # the prefix cache on: the one flag removed, the argv otherwise verbatim
    "radix": (_argv()[: -len(TAIL)], RECIPE_ENV),
    "radix-forced-reject": (
        _argv()[: -len(TAIL)],
        {
            **RECIPE_ENV,
            "SGLANG_SIMULATE_ACC_LEN": "1",
            "SGLANG_SIMULATE_ACC_TOKEN_MODE": "real-draft-token",
        },
    ),
}
PINNED = {
    "BITEXACT_DEEP_GEMM": "/nix/store/aaaa-sgl-deep-gemm-0.2.0",
    "BITEXACT_CUDA_HOME": "/nix/store/bbbb-nvidia-cuda-nvcc/lib/python3.12/site-packages/nvidia/cu13",
    "BITEXACT_HF_HUB_CACHE": "/nix/store/cccc-hf-cache/hub",
    "HOME": "/home/u",
    "PATH": "/usr/bin",
}


def _recipe_json() -> dict[str, Any]:
    return json.loads(RECIPE_PATH.read_text())


def test_recipe_lists_every_expected_variant() -> None:
    assert sorted(load_recipe(RECIPE_PATH).variants) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_variant_argv_and_env(name: str) -> None:
    recipe = load_recipe(RECIPE_PATH)
    launch = plan(recipe, name, {}, PINNED, PY)
    argv, env = EXPECTED[name]
    assert launch.argv == argv
    for key, value in env.items():
        assert launch.env.full[key] == value
    extra_sim = {k for k in launch.env.full if k.startswith("SGLANG_SIMULATE")} - set(env)
    assert not extra_sim
    assert launch.exact


def test_recipe_variant_is_verbatim_argv() -> None:
    verbatim = _recipe_json()["launch"]["argv"]
    launch = plan(load_recipe(RECIPE_PATH), "recipe", {}, PINNED, PY)
    assert launch.argv == [PY] + verbatim[1:]


def test_serving_flags_append_after_variant() -> None:
    launch = plan(load_recipe(RECIPE_PATH), "no-spec", {"--host": "0.0.0.0", "--port": "30000"}, PINNED, PY)
    assert launch.argv == _argv(spec=False) + ["--host", "0.0.0.0", "--port", "30000"]
    only_port = plan(load_recipe(RECIPE_PATH), "recipe", {"--host": None, "--port": "8000"}, PINNED, PY)
    assert only_port.argv == _argv() + ["--port", "8000"]


def test_serving_flag_outside_allowlist_is_refused() -> None:
    data = _recipe_json()
    data["launch"]["servingFlags"] = ["--port"]
    recipe = parse_recipe(data, Path("custom.json"))
    with pytest.raises(RecipeError, match=r"--host.*allowlist"):
        plan(recipe, "recipe", {"--host": "0.0.0.0"}, PINNED, PY)
    with pytest.raises(RecipeError, match="allowlist"):
        append_serving_flags(["python"], {"--tp-size": "2"}, ["--host", "--port"])


def test_serving_flag_already_in_argv_is_refused() -> None:
    with pytest.raises(RecipeError, match="already in the argv"):
        append_serving_flags(["python", "--port", "1"], {"--port": "2"}, ["--host", "--port"])


def test_unknown_variant_names_the_known_ones() -> None:
    with pytest.raises(RecipeError, match=r"unknown variant `spec-off`.*backend-flashinfer.*no-spec"):
        variant_named(load_recipe(RECIPE_PATH), "spec-off")


def test_unset_semantics() -> None:
    argv = ["python", "--a", "1", "--switch", "--b", "-1", "--end"]
    assert unset_flag(argv, "--a") == ["python", "--switch", "--b", "-1", "--end"]
    assert unset_flag(argv, "--switch") == ["python", "--a", "1", "--b", "-1", "--end"]
    assert unset_flag(argv, "--b") == ["python", "--a", "1", "--switch", "--end"]  # "-1" is a value
    assert unset_flag(argv, "--end") == ["python", "--a", "1", "--switch", "--b", "-1"]
    with pytest.raises(RecipeError, match="cannot unset --missing"):
        unset_flag(argv, "--missing")


def test_set_semantics() -> None:
    argv = ["python", "--a", "1", "--switch"]
    assert set_flag(argv, "--a", "2") == ["python", "--a", "2", "--switch"]
    assert set_flag(argv, "--new", "x") == argv + ["--new", "x"]
    with pytest.raises(RecipeError, match="switch without a value"):
        set_flag(argv, "--switch", "x")
    with pytest.raises(RecipeError, match="starts with - and would be read as another flag"):
        set_flag(argv, "--a", "--b")


def test_set_appends_missing_flags_in_sorted_order() -> None:
    data = _recipe_json()
    data["variants"]["two"] = {
        "set": {"--z-last": "1", "--a-first": "2", "--attention-backend": "torch_native"}
    }
    recipe = parse_recipe(data, Path("custom.json"))
    argv, _ = apply_variant(recipe.argv, recipe.env, recipe.variants["two"])
    assert argv[-4:] == ["--a-first", "2", "--z-last", "1"]
    assert argv[argv.index("--attention-backend") + 1] == "torch_native"


def test_variant_edit_errors_name_the_variant() -> None:
    data = _recipe_json()
    data["variants"]["bad"] = {"unset": ["--not-there"]}
    # Every variant's edits are applied when the recipe is read, so a broken one refuses the file
    # whichever variant is asked for (--print and --list-variants included).
    with pytest.raises(RecipeError, match=r"custom.json: variant `bad`: cannot unset --not-there"):
        parse_recipe(data, Path("custom.json"))


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ({"unset": "--x"}, "must be a list of strings"),
        ({"set": {"--port": 8}}, "quote numbers"),
        ({"sett": {}}, "unknown keys"),
        ({"speculative": "yes"}, "true or false"),
    ],
)
def test_malformed_variant_is_a_clear_error(edit: dict[str, Any], message: str) -> None:
    data = _recipe_json()
    data["variants"]["bad"] = edit
    with pytest.raises(RecipeError, match=message):
        parse_recipe(data, Path("custom.json"))


def test_recipe_argv_must_be_sglang() -> None:
    data = _recipe_json()
    data["launch"]["argv"] = ["vllm", "serve"]
    with pytest.raises(RecipeError, match="sglang.launch_server"):
        parse_recipe(data, Path("custom.json"))
    data = _recipe_json()
    del data["launch"]["env"]
    with pytest.raises(RecipeError, match="x.json: missing key `launch.env`"):
        parse_recipe(data, Path("x.json"))


def test_missing_recipe_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(RecipeError, match="nope.json: no such file; give the recipe file"):
        load_recipe(tmp_path / "nope.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(RecipeError, match="not valid JSON"):
        load_recipe(tmp_path / "bad.json")


def test_env_from_nix_pins() -> None:
    env = build_env(PINNED, RECIPE_ENV)
    key = hashlib.sha256(PINNED["BITEXACT_DEEP_GEMM"].encode()).hexdigest()[:32]
    assert env.decided == {
        "SGLANG_BATCH_INVARIANT_OPS_SMALL_M_TRITON": "16",
        "HF_HUB_OFFLINE": "1",
        "HF_HUB_CACHE": PINNED["BITEXACT_HF_HUB_CACHE"],
        "CUDA_HOME": PINNED["BITEXACT_CUDA_HOME"],
        "SGLANG_DG_CACHE_DIR": f"/home/u/.cache/bitexact/deep-gemm/{key}",
    }
    assert env.full["PATH"] == "/usr/bin"
    assert env.notes == []


def test_env_takes_callers_cache_and_says_so() -> None:
    caller = {k: v for k, v in PINNED.items() if k != "BITEXACT_HF_HUB_CACHE"}
    caller |= {"HF_HUB_CACHE": "/data/hf", "HF_HUB_OFFLINE": "0", "XDG_CACHE_HOME": "/xdg"}
    env = build_env(caller, RECIPE_ENV)
    assert env.full["HF_HUB_CACHE"] == "/data/hf"
    assert env.full["HF_HUB_OFFLINE"] == "1"
    assert env.full["SGLANG_DG_CACHE_DIR"].startswith("/xdg/bitexact/deep-gemm/")
    assert any("BITEXACT_HF_HUB_CACHE unset" in note and "/data/hf" in note for note in env.notes)


def test_env_forcing_hf_hub_offline_over_the_callers_zero_says_so() -> None:
    env = build_env(PINNED | {"HF_HUB_OFFLINE": "0"}, RECIPE_ENV)
    assert env.full["HF_HUB_OFFLINE"] == "1"
    (note,) = [n for n in env.notes if "HF_HUB_OFFLINE" in n]
    assert note.startswith("HF_HUB_OFFLINE='0' from the caller is replaced by '1'")
    assert build_env(PINNED | {"HF_HUB_OFFLINE": "1"}, RECIPE_ENV).notes == []  # nothing to say


def test_env_keeps_callers_dg_cache_and_overrides_recipe_vars_loudly() -> None:
    caller = PINNED | {"SGLANG_DG_CACHE_DIR": "/mine", "SGLANG_BATCH_INVARIANT_OPS_SMALL_M_TRITON": "0"}
    env = build_env(caller, RECIPE_ENV)
    assert env.full["SGLANG_DG_CACHE_DIR"] == "/mine"
    assert "SGLANG_DG_CACHE_DIR" not in env.decided
    assert env.full["SGLANG_BATCH_INVARIANT_OPS_SMALL_M_TRITON"] == "16"
    assert any("replaced by the recipe's" in note for note in env.notes)


def test_dg_cache_is_keyed_by_deep_gemm_path_and_header() -> None:
    first = build_env(PINNED, {}).full["SGLANG_DG_CACHE_DIR"]
    other = build_env(PINNED | {"BITEXACT_DEEP_GEMM": "/nix/store/dddd-sgl-deep-gemm-0.2.0"}, {})
    assert other.full["SGLANG_DG_CACHE_DIR"] != first
    assert build_env(PINNED, {}).full["SGLANG_DG_CACHE_DIR"] == first
    # Outside the store the files can change in place: the header's bytes change the key.
    assert deep_gemm_cache_key("/venv/site", b"fenced") != deep_gemm_cache_key("/venv/site", b"unfenced")
    assert deep_gemm_cache_key("/venv/site", None) != deep_gemm_cache_key("/venv/site", b"fenced")
    no_nix = {k: v for k, v in PINNED.items() if k != "BITEXACT_DEEP_GEMM"}
    found = build_env(no_nix, {}, installed_deep_gemm=Path("/venv/site"), installed_header=b"fenced")
    assert found.full["SGLANG_DG_CACHE_DIR"].endswith(deep_gemm_cache_key("/venv/site", b"fenced"))
    nothing = build_env(no_nix, {})
    assert "SGLANG_DG_CACHE_DIR" not in nothing.full
    assert any("deep_gemm not found" in note for note in nothing.notes)


def test_cuda_home_from_pin_wins_over_caller() -> None:
    env = build_env(PINNED | {"CUDA_HOME": "/usr/local/cuda"}, {})
    assert env.full["CUDA_HOME"] == PINNED["BITEXACT_CUDA_HOME"]
    no_pin = {k: v for k, v in PINNED.items() if k != "BITEXACT_CUDA_HOME"} | {"CUDA_HOME": "/usr/local/cuda"}
    kept = build_env(no_pin, {})
    assert kept.full["CUDA_HOME"] == "/usr/local/cuda"
    assert any("caller's CUDA_HOME=/usr/local/cuda" in note for note in kept.notes)
