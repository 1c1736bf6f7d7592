"""Every command of the flake's battery plan (checks/plans/e2e-tiny-hybrid.json, kept equal to what Nix
evaluates by test_e2e_plan.py) run by the real bitexact, as the GPU check's runner runs them, against a
real HTTP server in SGLang 0.5.20's shapes (canned_sglang.py): the references against a server that does not
speculate, every battery against one that does, on an H200 as the NVML stand-in describes it (bitexact
keys goldens by the card it reads there; driver_standins.py). The server's values are canned, so every
battery must pass: a command the CLI refuses, or a battery that cannot pass against a perfect server,
fails here before it reaches a GPU (as a same-engine refusal once would have: gpu-parity-inflight-8
runs `parity @URL@ @URL@` with 8 against 1 in flight). The prefix-reuse batteries (`radix = true`) run
against a server with a radix cache whose answers from the cache equal those computed afresh; against
one whose cache moves a bit, never hits, or is off, they must not pass."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from checkhelpers.battery_plan import BATTERIES, PLAN, RECIPE, SHORT_LONG, card_env, run_references
from checkhelpers.battery_plan import run_bitexact as bitexact
from checkhelpers.canned_sglang import CannedSGLang
from gpuchecks.plan import fill  # the runner's own placeholder filling


@pytest.fixture(scope="module")
def card(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment under which bitexact reads an H200 through NVML (the stand-in driver)."""
    return card_env(tmp_path_factory.mktemp("driver"))


@pytest.fixture(scope="module")
def references(tmp_path_factory: pytest.TempPathFactory, card: dict[str, str]) -> dict[str, Path]:
    """The plan's own reference commands against a server that does not speculate (the no-spec side)."""
    root = tmp_path_factory.mktemp("references")
    with CannedSGLang("normal") as server:
        made = run_references(server.url, root, card)
        # This card's golden, as the record-golden app records it (the recipe variant, --golden-dir).
        golden = ["bitexact", "golden", "record", f"sglang+{server.url}", "--recipe", str(RECIPE)]
        golden += ["--variant", "no-spec", "--golden-dir", str(root / "golden"), "--no-history"]
        for prompts in (
            [],
            ["--long", SHORT_LONG, "--tokenizer", "bytes"],
        ):  # <recipe>.json, <recipe>-long.json
            done = bitexact([*golden, *prompts, "--out", str(root / f"golden-out{len(prompts)}")], root, card)
            assert done.returncode == 0, done.stderr[-3000:]
        made["golden_dir"] = root / "golden"
    return made


@pytest.mark.parametrize("battery", BATTERIES, ids=lambda b: b["name"])
def test_every_battery_passes_against_a_server_that_answers_alike(
    battery: dict, references: dict[str, Path], card: dict[str, str], tmp_path: Path
) -> None:
    """A radix battery against a radix cache, and against one that keeps state as SGLang does for a hybrid
    model (reused only where a state was kept: the fills before the warm passes make one), matching in
    the 64-token units the H200 run of 2026-12-02 measured: the plain commands' --min-prompt-tokens 65
    leaves out the prompts that cannot hit there."""
    assert battery["variant"] != "no-spec"  # every battery's server speculates: the canned one says so
    for behaviour in ("radix", "radix-hybrid-64") if battery.get("radix") else ("spec",):
        with CannedSGLang(behaviour) as server:
            values = {
                "URL": f"sglang+{server.url}",
                "RECIPE": str(RECIPE),
                "OUT": str(tmp_path / behaviour if battery.get("radix") else tmp_path),
                "REF": str(references[battery["reference"]]) if battery["reference"] else "@REF@",
                "REF_LONG": str(references["long"]),
                "GOLDEN_DIR": str(references["golden_dir"]),
                "MODEL_SNAPSHOT": "bytes",
            }
            for command in battery["commands"]:
                command = list(command)
                if "--long" in command:  # the golden's long prompts, shortened as the references' are
                    command[command.index("--long") + 1] = SHORT_LONG
                done = bitexact(fill(command, values), tmp_path, card)
                assert done.returncode == 0, (
                    f"{' '.join(command)}\n{done.stdout[-1500:]}\n{done.stderr[-3000:]}"
                )
                if "--json" in command:
                    summary = json.loads(done.stdout)
                    assert summary.get("differ", 0) == 0 and summary.get("divergent", 0) == 0
                if command[1] == "warm":  # hits in every warm answer, none in a cold one
                    assert summary["warm_hits_min"] > 0 and not summary["refused"]
                    assert all(row["cold"] == 0 for row in summary["hits"])
                    if "--min-prompt-tokens" in command:  # one id per byte: what it leaves out is short
                        assert all(p["prompt_tokens"] < 65 for p in summary["left_out"])
    if battery["name"] == "gpu-golden":  # its history line, in the output (the golden dir is read only)
        lines = [json.loads(line) for line in (tmp_path / "history.jsonl").read_text().splitlines()]
        assert [line["verdict"] for line in lines] == ["EQUAL", "EQUAL"]
        assert [line["recipe"] for line in lines] == ["e2e-tiny-hybrid", "e2e-tiny-hybrid-long"]
        assert {line["card"] for line in lines} == {"h200"}


RADIX = [b for b in BATTERIES if b.get("radix")]
# behaviour of the server -> exit status every radix battery command must get
VACUOUS = {"radix-drift": 1, "radix-never-hits": 2, "spec": 2}


def test_every_radix_battery_is_a_warm_run_on_a_radix_variant() -> None:
    """Cold then warm, a shared unaligned prefix, a long prompt cached then extended, in flight, forced
    rejects, repeats, the golden: each on a radix variant, each a `bitexact warm` (their names and
    variants: test_gpu_batteries.py)."""
    commands = [c for b in RADIX for c in b["commands"]]
    assert all(c[:3] == ["bitexact", "warm", "@URL@"] for c in commands)
    assert {b["variant"] for b in RADIX} == {"radix", "radix-forced-reject"}
    assert any("--golden-dir" in c for c in commands) and any("--inflight" in c for c in commands)
    shared = [
        c[c.index("--shared-prefix") + 1] for b in RADIX for c in b["commands"] if "--shared-prefix" in c
    ]
    assert {"1237", "64k", "65537"} == set(shared)
    assert all(int(n) % 2 == 1 for n in shared if n != "64k")  # aligned to no page, chunk or split size
    (repeat,) = next(b for b in RADIX if b["name"] == "gpu-radix-repeat")["commands"]
    assert repeat[repeat.index("--warm-passes") + 1] == str(PLAN["repeats"] - 1)  # 50 answers per prompt


@pytest.mark.parametrize("behaviour", sorted(VACUOUS))
@pytest.mark.parametrize("battery", RADIX, ids=lambda b: b["name"])
def test_a_radix_battery_fails_when_the_cache_moves_bits_or_does_not_hit(
    battery: dict, behaviour: str, references: dict[str, Path], card: dict[str, str], tmp_path: Path
) -> None:
    """Each command against a cache that moves a bit (DIFFERENT, 1), one that never reports a hit and one
    switched off (refused, 2): none passes. Three prompts where a command runs more (a shorter run; the
    shipped battery's first two are shorter than 65 tokens, which the plain commands leave out)."""
    with CannedSGLang(behaviour) as server:
        values = {"URL": f"sglang+{server.url}", "RECIPE": str(RECIPE), "OUT": str(tmp_path)}
        values |= {"GOLDEN_DIR": str(references["golden_dir"]), "MODEL_SNAPSHOT": "bytes"}
        for command in battery["commands"]:
            command = list(command)
            if "--long" in command:
                command[command.index("--long") + 1] = SHORT_LONG
            if "--limit" not in command:
                command += ["--limit", "3"]
            done = bitexact(fill(command, values), tmp_path, card)
            assert done.returncode == VACUOUS[behaviour], f"{' '.join(command)}\n{done.stderr[-2000:]}"
            if behaviour != "radix-drift":
                assert "refused" in done.stderr or "--disable-radix-cache" in done.stderr


def test_a_capacity_battery_fails_when_answers_move(
    references: dict[str, Path], card: dict[str, str], tmp_path: Path
) -> None:
    """The same battery against a server whose answers differ from the reference (NaN at one position is
    refused, exit 2; it must not pass)."""
    battery = next(b for b in BATTERIES if b["name"] == "gpu-capacity-max-running-1")
    with CannedSGLang("nan") as server:
        values = {"URL": f"sglang+{server.url}", "RECIPE": str(RECIPE), "OUT": str(tmp_path)}
        values |= {"REF": str(references["short"]), "REF_LONG": str(references["long"])}
        done = bitexact(fill(battery["commands"][0], values), tmp_path, card)
    assert done.returncode == 2 and "is nan" in done.stderr


def test_a_killed_command_makes_the_step_an_error_never_a_pass() -> None:
    from gpuchecks.results import worst_exit
    from gpuchecks.run import rerun_command

    assert worst_exit([{"exit": 0}, {"exit": -9}]) == 2  # killed by SIGKILL (the OOM killer, say)
    assert worst_exit([{"exit": 0}, {"exit": 1}]) == 1 and worst_exit([{"exit": 0}]) == 0
    assert worst_exit([{"exit": 1}, {"exit": 3}]) == 2
    assert rerun_command(["bitexact", "golden", "record", "URL"]) == [
        "bitexact",
        "golden",
        "record",
        "URL",
        "--force",
    ]
    assert rerun_command(["bitexact", "golden", "check", "URL"]) == ["bitexact", "golden", "check", "URL"]
