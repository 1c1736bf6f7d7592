"""The perf servers (lab/perf/perf_servers.py): the perf recipe differs from the recipe only in the model
paths and `--load-format dummy`; the launcher turns its variants into the servers; the runner's trees start
them; a server's meta_info must show the speculation it was started with; a bare machine is named with the
fix; fewer request slots are a recipe copy; the 27B goldens' commands; and every committed perf run's server
folders ran what their names say."""

from __future__ import annotations

import argparse
import ast
import json
from pathlib import Path

import pytest
from exactlaunch.cli import plan
from exactlaunch.recipe import load_recipe

from lab.perf import lab_servers, perf_servers, run_errors

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "nix" / "recipes" / "qwen3.8-27b-exact.json"
PERF = REPO / "nix" / "recipes" / "perf-27b-shape.json"


def _args(tmp_path: Path, **extra: object) -> argparse.Namespace:
    """`measure`'s options that the recipe copy reads."""
    return argparse.Namespace(**{"results": tmp_path / "results", **extra})


ADDED_VARIANTS = {
    "perf-exact-spec", "perf-exact-spec-window", "perf-stock-spec", "perf-stock-no-spec",
    "perf-exact-spec-radix", "perf-stock-spec-radix",
}  # fmt: skip


def test_the_perf_recipe_changes_only_the_model_paths_and_the_load_format() -> None:
    recipe, perf = json.loads(RECIPE.read_text()), json.loads(PERF.read_text())
    argv, perf_argv = recipe["launch"]["argv"], perf["launch"]["argv"]
    assert perf_argv[-2:] == ["--load-format", "dummy"]
    changed = [i for i, (a, b) in enumerate(zip(argv, perf_argv[:-2], strict=True)) if a != b]
    assert [argv[i - 1] for i in changed] == ["--model-path", "--speculative-draft-model-path"]
    assert [perf_argv[i] for i in changed] == [perf["model"]["path"], perf["drafter"]["path"]]
    assert perf["launch"]["env"] == recipe["launch"]["env"]
    assert perf["launch"]["servingFlags"] == recipe["launch"]["servingFlags"]
    for key in ("engine", "deepGemm", "sampling", "reference", "schema"):
        assert perf[key] == recipe[key], key
    assert {k: v for k, v in perf["variants"].items() if k not in ADDED_VARIANTS} == recipe["variants"]
    assert set(perf["variants"]) - set(recipe["variants"]) == ADDED_VARIANTS
    assert perf["model"]["path"] == ".e2e/perf-27b/target"  # where lab/perf/host.sh model writes it
    assert "-m lab.perf.model_27b .e2e/perf-27b" in (REPO / "lab" / "perf" / "host.sh").read_text()


def test_the_four_servers_from_the_launcher() -> None:
    recipe = load_recipe(PERF)
    serving = {"--host": "127.0.0.1", "--port": "30000"}
    launches = {
        name: plan(recipe, s.variant, serving, {}, "python3") for name, s in perf_servers.SERVERS.items()
    }
    exact, stock, plain = launches["exact-spec"], launches["stock-spec"], launches["exact-no-spec"]
    reference = launches["stock-no-spec"]
    assert exact.exact and not stock.exact and plain.exact and not reference.exact
    assert [a for a in plain.argv if a != "--enable-deterministic-inference"] == reference.argv
    assert [a for a in exact.argv if a != "--enable-deterministic-inference"] == stock.argv
    assert exact.argv[3:-4] == list(recipe.argv[3:])  # the recipe's argv, then --host/--port
    assert "--speculative-algorithm" not in plain.argv and "--load-format" in plain.argv
    for launch in (exact, stock):
        assert launch.env.decided["SGLANG_SIMULATE_ACC_LEN"] == "5"
        assert launch.env.decided["SGLANG_SIMULATE_ACC_TOKEN_MODE"] == "real-draft-token"
    assert "SGLANG_SIMULATE_ACC_LEN" not in plain.env.decided | reference.env.decided
    assert [perf_servers.accept_len(s) for s in perf_servers.SERVERS.values()] == [
        5.0,
        5.0,
        5.0,
        None,
        None,
        5.0,
        5.0,
    ]
    for name, plain_twin in (("exact-spec-radix", exact), ("stock-spec-radix", stock)):
        radix = launches[name]
        assert perf_servers.SERVERS[name].reuse and radix.exact == plain_twin.exact
        assert "--disable-radix-cache" in plain_twin.argv
        assert [a for a in plain_twin.argv if a != "--disable-radix-cache"] == radix.argv
    window = launches["exact-spec-window"]
    assert window.exact and window.env.decided["SGLANG_SIMULATE_ACC_LEN"] == "5"
    at = window.argv.index("--speculative-draft-window-size")
    assert window.argv[at + 1] == "4096" and [*window.argv[:at], *window.argv[at + 2 :]] == exact.argv
    assert {s.tree for s in perf_servers.SERVERS.values()} == {"patched", "stock"}
    assert (
        perf_servers.SERVERS["stock-spec"].tree == "stock"
        and perf_servers.SERVERS["exact-spec"].tree == "patched"
    )
    assert perf_servers.SERVERS["stock-no-spec"].tree == "stock"


def test_server_commands_through_the_product_runner(tmp_path: Path) -> None:
    """The runner's trees (lab_servers.py) with the perf recipe: the launcher for the patched tree (it carries
    the series' manifest), the launcher's printed argv and env for the stock tree (run for real:
    `exactlaunch.cli --print`), plus the lab's host settings."""
    (tmp_path / "patched" / "sglang" / "srt").mkdir(parents=True)
    (tmp_path / "patched" / "sglang" / "srt" / "bitexact_manifest.json").write_text("{}")
    tree = lab_servers.tree_of
    argv, env = tree(tmp_path, "patched").server_command(perf_servers.RECIPE, "perf-exact-spec", 30001)
    assert argv[1:] == [
        "-m", "exactlaunch.cli", "--recipe", str(PERF), "--variant", "perf-exact-spec",
        "--host", "127.0.0.1", "--port", "30001",
    ]  # fmt: skip
    argv, env = tree(tmp_path, "stock").server_command(perf_servers.RECIPE, "perf-stock-spec", 30001)
    assert "--enable-deterministic-inference" not in argv and argv[-6:] == [
        "--load-format", "dummy", "--host", "127.0.0.1", "--port", "30001",
    ]  # fmt: skip
    assert env["SGLANG_SIMULATE_ACC_LEN"] == "5" and env["SGLANG_SKIP_SGL_KERNEL_VERSION_CHECK"] == "1"
    assert env["SGLANG_ENABLE_JIT_DEEPGEMM"] == "0" and env["PYTHONPATH"].startswith(str(tmp_path / "stock"))


def test_meta_info_must_show_the_stated_speculation() -> None:
    spec, plain = perf_servers.SERVERS["exact-spec"], perf_servers.SERVERS["exact-no-spec"]
    simulated = {"completion_tokens": 128, "spec_accept_length": 5.0, "spec_verify_ct": 26}
    assert perf_servers.check_meta(spec, simulated)["ok"]
    real = {"completion_tokens": 128, "spec_accept_length": 1.02, "spec_verify_ct": 125}  # not simulated
    assert not perf_servers.check_meta(spec, real)["ok"]
    assert "speculation did not run" in perf_servers.check_meta(spec, {"completion_tokens": 128})["check"]
    assert perf_servers.check_meta(plain, {"completion_tokens": 128})["ok"]
    assert not perf_servers.check_meta(plain, simulated)["ok"]


def test_a_bare_machine_is_named_with_the_fix(tmp_path: Path) -> None:
    with pytest.raises(run_errors.RunError, match=r"host\.sh stash"):
        perf_servers.check_ready(tmp_path)


def test_fewer_request_slots_are_a_recipe_copy_the_servers_start_from(tmp_path: Path) -> None:
    """--max-running-requests replaces the recipe's value in a copy (nothing else changes), the servers
    start from that copy through the launcher, and run.json records the slots either way."""
    args = _args(tmp_path, max_running_requests=2)
    copy = perf_servers.served_recipe(args)
    original, changed = json.loads(PERF.read_text()), json.loads(copy.read_text())
    argv = changed["launch"]["argv"]
    assert argv[argv.index("--max-running-requests") + 1] == "2"
    argv[argv.index("--max-running-requests") + 1] = "8"
    assert changed == original and copy.parent == args.results
    assert perf_servers.max_running(args) == 2 and perf_servers.max_running(_args(tmp_path)) == 8
    assert perf_servers.served_recipe(_args(tmp_path)) == perf_servers.RECIPE
    (tmp_path / "patched" / "sglang" / "srt").mkdir(parents=True)
    (tmp_path / "patched" / "sglang" / "srt" / "bitexact_manifest.json").write_text("{}")
    argv, _ = lab_servers.tree_of(tmp_path, "patched").server_command(copy, "perf-exact-spec", 30001)
    assert argv[argv.index("--recipe") + 1] == str(copy)
    with pytest.raises(ValueError, match="sets no --no-such-flag"):
        lab_servers.with_launch_value(PERF, "--no-such-flag", "1", tmp_path / "x.json")


def test_the_27b_goldens_are_recorded_before_they_are_checked(tmp_path: Path) -> None:
    """lab/perf/goldens.py's commands, parsed by bitexact's own parser: record the prompts and the long
    prompts into --recorded first; with --check, check both against the committed goldens (the card's own
    or its family's), at the golden's long lengths and with the 27B shape's tokenizer."""
    from bitexact.cli import build_parser

    from lab.perf import goldens

    args = argparse.Namespace(
        recorded=tmp_path / "rec", out=tmp_path / "out", long="16k", build_id="abc", check=True,
        golden_dir=REPO / "checks" / "golden",
    )  # fmt: skip
    planned = goldens.commands(args, "sglang+http://127.0.0.1:30000", tmp_path / "info.json")
    assert [name for name, _ in planned] == ["record", "record-long", "check", "check-long"]
    parser = build_parser()
    for name, command in planned:
        parsed = parser.parse_args(command[1:])
        assert Path(parsed.recipe) == perf_servers.RECIPE and parsed.variant == "recipe"
        assert parsed.golden_dir == (args.recorded if name.startswith("record") else args.golden_dir)
        assert (parsed.long == "16k") == name.endswith("-long")
        assert parsed.build_info == tmp_path / "info.json"
    args.check = False
    assert [name for name, _ in goldens.commands(args, "u", tmp_path)] == ["record", "record-long"]


# The lent card's runs (docs/evidence/perf-*): each server folder ran what its name in SERVERS says.
PERF_RUNS = sorted((REPO / "docs" / "evidence").glob("perf-*"))


def _logged_server_args(log: Path) -> dict:
    line = next(x for x in log.read_text().splitlines() if "server_args={" in x)
    return ast.literal_eval(line.split("server_args=", 1)[1])


@pytest.mark.evidence
@pytest.mark.parametrize("evidence", PERF_RUNS, ids=lambda p: p.name)
def test_every_committed_server_ran_what_its_name_says(evidence: Path) -> None:
    ran = {name: spec for name, spec in perf_servers.SERVERS.items() if (evidence / name).is_dir()}
    assert len(ran) >= 2, sorted(ran)
    for name, spec in ran.items():
        folder = evidence / name
        meta = json.loads((folder / "meta.json").read_text())
        assert meta["ok"], name
        if (folder / "bench.json").exists():
            identity = json.loads((folder / "bench.json").read_text())["identity"]
            assert identity["enable_deterministic_inference"] is (spec.tree == "patched"), name
            assert (identity["speculative_algorithm"] == "DFLASH") is spec.speculative, name
            assert "--load-format dummy" in identity["launch_command"], name
        else:  # a server that measured prefix reuse alone: its log's server_args say what ran
            args = _logged_server_args(folder / "server.log.head-tail")
            assert args["enable_deterministic_inference"] is (spec.tree == "patched"), name
            assert (args["speculative_algorithm"] == "DFLASH") is spec.speculative, name
            assert args["load_format"] == "dummy", name
            assert args["disable_radix_cache"] is False and (folder / "reuse.json").exists(), name
        if not (folder / "run.json").exists():  # a run cut by the end of the device time (its calls.md)
            assert (evidence / name, evidence.name) == (folder, "perf-h200-2026-12-01-long-context")
            continue
        run_json = json.loads((folder / "run.json").read_text())
        assert run_json["variant"] == spec.variant and run_json["tree"] == spec.tree, name
