"""checks/e2e/goldens.py, the H200's golden recorder and checker, run here with the real bitexact against
canned servers in SGLang 0.5.20's shapes (canned_sglang.py) started as processes on real ports, on an H200
as the NVML stand-in describes it (driver_standins.py). Only the server command and the build description
are stand-ins (no SGLang runs here); the record and check commands are the record-golden app's and the
gpu-golden battery's, the history lines bitexact's own."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from driver_standins import H200, install_driver, nvml_env
from net_support import free_port

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "checks" / "e2e"))
import batteries  # noqa: E402
import goldens  # noqa: E402

CANNED = REPO / "checks" / "offline" / "canned_sglang.py"
# The tree name says how its canned server answers: alike, or with one logprob a float32 step away.
BEHAVIOUR = {"patched": "spec", "drifted": "drift"}


@pytest.fixture
def standins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    driver = install_driver(tmp_path / "driver" / "lib")
    for key, value in {"BITEXACT_DRIVER_LIB": str(driver), **nvml_env(H200)}.items():
        monkeypatch.setenv(key, value)

    def server_command(
        work: Path, tree: str, variant: str, port: int, recipe: Path
    ) -> tuple[list[str], dict[str, str]]:
        argv = [sys.executable, str(CANNED), "--port", str(port), "--behaviour", BEHAVIOUR[tree]]
        return argv, batteries.base_env(work, tree, recipe)

    def build_info(work: Path, tree: str, recipe: Path, dest: Path) -> Path:
        dest.write_text(json.dumps({"sglang.tree": f"digest-of-{tree}", "recipe": "e2e-tiny-hybrid"}))
        return dest

    monkeypatch.setattr(batteries, "server_command", server_command)
    monkeypatch.setattr(goldens, "build_info", build_info)


def run(tmp_path: Path, *steps: str) -> list[dict]:
    for tree in BEHAVIOUR:
        (tmp_path / "work" / tree / "sglang").mkdir(parents=True, exist_ok=True)
    args = ["--work", str(tmp_path / "work"), "--out", str(tmp_path / "out"), "--golden-dir"]
    args += [str(tmp_path / "golden"), "--port", str(free_port()), "--build-id", "abc123"]
    args += ["--long", "64,300", "--tokenizer", "bytes", "--start-timeout", "60", *steps]
    assert goldens.main(args) == 0
    return [json.loads(line) for line in (tmp_path / "out" / "verdicts.jsonl").read_text().splitlines()]


def test_record_then_checks_write_goldens_verdicts_and_one_history(standins: None, tmp_path: Path) -> None:
    verdicts = run(tmp_path, "record", "check:restart=patched", "check:moved=drifted")
    assert [(v["name"], v["exit"]) for v in verdicts] == [("record", 0), ("restart", 0), ("moved", 1)]
    card = tmp_path / "golden" / "h200"
    assert {p.name for p in card.iterdir()} == {
        "e2e-tiny-hybrid.json",
        "e2e-tiny-hybrid-long.json",
        "history.jsonl",
    }
    history = [json.loads(line) for line in (card / "history.jsonl").read_text().splitlines()]
    assert [(h["verdict"], h["recipe"]) for h in history] == [
        ("RECORDED", "e2e-tiny-hybrid"),
        ("RECORDED", "e2e-tiny-hybrid-long"),
        ("EQUAL", "e2e-tiny-hybrid"),
        ("EQUAL", "e2e-tiny-hybrid-long"),
        ("DIFFERENT", "e2e-tiny-hybrid"),
        ("DIFFERENT", "e2e-tiny-hybrid-long"),
    ]
    # each line carries the build it was told (BITEXACT_BUILD_INFO / BITEXACT_BUILD_ID, as in the flake)
    trees = [h["build"]["components"]["build.sglang.tree"] for h in history]
    assert trees == ["digest-of-patched"] * 4 + ["digest-of-drifted"] * 2
    assert {h["build"]["components"]["build_id"] for h in history} == {"abc123"}


def test_a_rerun_skips_the_steps_already_done(standins: None, tmp_path: Path) -> None:
    run(tmp_path, "record")
    verdicts = run(tmp_path, "record", "check:restart=patched")
    assert [v["name"] for v in verdicts] == ["record", "restart"]  # record ran once: no --force needed


def test_a_rerun_runs_a_step_whose_verdict_is_an_error_again(
    standins: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A step that ended in an error (a server that did not start) compared nothing: kept as done, it
    would have stood in for the real run on every rerun. Here the failed try had written its goldens
    (the long record failing after the short one, say): the rerun replaces them instead of refusing."""
    verdicts_path = tmp_path / "out" / "verdicts.jsonl"
    run(tmp_path, "record")
    golden = tmp_path / "golden" / "h200" / "e2e-tiny-hybrid.json"
    first = golden.read_text()
    verdicts_path.write_text(verdicts_path.read_text().replace('"exit": 0', '"exit": 2'))
    verdicts = run(tmp_path, "record")
    assert [(v["name"], v["exit"]) for v in verdicts] == [("record", 2), ("record", 0)]
    assert "record: its verdict in" in capsys.readouterr().err
    assert all(r["command"][-1] == "--force" for r in verdicts[1]["results"])
    assert golden.read_text() != first  # recorded again (its recording time differs)


@pytest.mark.parametrize(
    ("step", "message"),
    [
        ("check:stock", "write check:NAME=TREE[:VARIANT]"),
        ("check:=patched", "write check:NAME=TREE[:VARIANT]"),
        ("chek:a=b", "unknown step 'chek:a=b'"),
        ("check:x=no-such-tree", "no-such-tree: assemble.py build makes patched/ and stock/"),
    ],
)
def test_a_bad_step_is_refused_before_any_server_starts(
    step: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        goldens.main(
            ["--work", str(tmp_path / "w"), "--out", str(tmp_path / "o"), "--golden-dir", "g", step, "record"]
        )
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and message in err, err
    assert not (tmp_path / "o").exists()  # nothing ran
