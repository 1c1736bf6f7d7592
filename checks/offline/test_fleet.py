"""The launcher's fleet (`bitexact-server --replicas N`, exactlaunch/fleet.py) before SGLang's real router.

The router is the released sglang-router 0.3.2 from PyPI (its Rust binary, run as the fleet runs it);
the replicas are the canned SGLang server (canned_sglang.py: FakeServer's shapes, cited from SGLang
0.5.20's http_server.py), since no model runs here. What is real: the router's routing and the
endpoints it answers itself (found here: its /get_server_info is its own, `{"router_manager": true,
...}`, and /workers lists the workers, so bitexact names the workers' build), the processes, their
ports and the supervision. The H200 run of real replicas is docs/evidence/e2e-h200-2026-12-01.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from checkhelpers.net_support import free_ports
from exactlaunch import fleet

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "nix" / "recipes" / "e2e-tiny-hybrid.json"
# The released router, where checks/requirements-offline.txt installed it (CI's venv; nixpkgs has none, so
# the flake's sandboxed run of this suite skips the two tests that start it).
needs_router = pytest.mark.skipif(
    importlib.util.find_spec("sglang_router") is None,
    reason="sglang-router is not installed (checks/requirements-offline.txt installs it)",
)


def test_replicas_sharing_a_gpu_divide_its_memory_in_start_order() -> None:
    argv = ["python", "-m", "sglang.launch_server", "--mem-fraction-static", "0.88", "--host", "h"]
    replicas, router = fleet.fleet_plan(argv, {"A": "1"}, "py", 3, "0", "127.0.0.1", 30100, "round_robin")
    fractions = [float(r.argv[r.argv.index("--mem-fraction-static") + 1]) for r in replicas]
    # SGLang sizes a replica's pools as fraction x (memory free at its start); one after another, each
    # then gets the same share of the card: 0.88 / 3.
    free, shares = 1.0, []
    for f in fractions:
        shares.append(f * free)
        free -= f * free
    assert shares == pytest.approx([0.88 / 3] * 3, rel=1e-3)
    assert [r.argv[r.argv.index("--port") + 1] for r in replicas] == ["30101", "30102", "30103"]
    assert all(r.env == {"A": "1"} and "--base-gpu-id" not in r.argv for r in replicas)
    assert router.argv[:3] == ["py", "-m", "sglang_router.launch_router"]
    assert router.argv[router.argv.index("--worker-urls") + 1 : router.argv.index("--policy")] == [
        r.url for r in replicas
    ]


def test_a_wildcard_bind_is_reached_on_the_loopback() -> None:
    replicas, router = fleet.fleet_plan(["python"], {}, "py", 1, "0", "0.0.0.0", 30100, "round_robin")
    assert replicas[0].url == "http://127.0.0.1:30101" and router.url == "http://127.0.0.1:30100"
    assert router.argv[router.argv.index("--host") + 1] == "0.0.0.0"  # it still listens where asked


def test_replicas_on_their_own_gpus_keep_the_recipes_memory() -> None:
    argv = ["python", "--mem-fraction-static", "0.88"]
    replicas, _ = fleet.fleet_plan(argv, {}, "py", 2, "0,1", "127.0.0.1", 30100, "round_robin")
    assert [r.argv for r in replicas] == [
        ["python", "--mem-fraction-static", "0.88", "--port", "30101"],
        ["python", "--mem-fraction-static", "0.88", "--port", "30102", "--base-gpu-id", "1"],
    ]


@pytest.mark.parametrize(
    ("replicas", "gpus", "policy", "message"),
    [
        (0, "0", "round_robin", "at least one replica"),
        (2, "0", "fastest", "--router-policy 'fastest'"),
        (2, "", "round_robin", "names no GPU"),
        (2, "0", "round_robin@65534", "leaves no room for 2 replicas"),
        (2, "0,,1", "round_robin", r"--gpus: '0,,1': '' is not a GPU index"),
        (2, "0, 1", "round_robin", r"' 1' is not a GPU index"),
        (2, "0,0", "round_robin", "names GPU 0 more than once"),
        (1, "0,1", "round_robin", r"names 2 GPUs for 1 replica\(s\): GPU 1 would serve nothing"),
    ],
)
def test_bad_fleets_are_refused(replicas: int, gpus: str, policy: str, message: str) -> None:
    policy, _, port = policy.partition("@")
    with pytest.raises(fleet.FleetError, match=message):
        fleet.fleet_plan(["python"], {}, "py", replicas, gpus, "127.0.0.1", int(port or 1), policy)


def launcher(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "exactlaunch.cli", "--recipe", str(RECIPE), *args],
        capture_output=True,
        text=True,
    )


def test_the_launcher_prints_its_fleet_and_refuses_one_without_a_port() -> None:
    done = launcher("--replicas", "2", "--host", "127.0.0.1", "--port", "30100", "--print")
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)["fleet"]
    assert [r["url"] for r in plan["replicas"]] == ["http://127.0.0.1:30101", "http://127.0.0.1:30102"]
    recipe_argv = json.loads(RECIPE.read_text())["launch"]["argv"]
    at = recipe_argv.index("--mem-fraction-static") + 1
    for share, replica in zip(("0.44", "0.7857"), plan["replicas"], strict=True):
        # the recipe's argv with the memory share and the port changed only
        expected = [*recipe_argv[1:at], share, *recipe_argv[at + 1 :], "--host", "127.0.0.1"]
        assert replica["argv"][1:] == [*expected, "--port", replica["url"].rsplit(":", 1)[1]]
    refused = launcher("--replicas", "2")
    assert refused.returncode == 2 and "--replicas needs --port" in refused.stderr
    alone = launcher("--gpus", "0,1", "--log-dir", "logs", "--print")
    assert alone.returncode == 2 and "--gpus, --log-dir only apply with --replicas N" in alone.stderr


def get(url: str) -> object:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return json.load(answer)


@pytest.fixture
def running_fleet(tmp_path: Path) -> Iterator[tuple[str, list[str], subprocess.Popen[bytes]]]:
    """Two canned replicas and the real router, supervised by `python -m exactlaunch.fleet PLAN`."""
    router_port, *ports = free_ports(3)
    replicas = [
        fleet.Process(
            f"replica-{i}",
            [sys.executable, "-m", "checkhelpers.canned_sglang", "--port", str(p)],
            {},
            f"http://127.0.0.1:{p}",
        )
        for i, p in enumerate(ports)
    ]
    _, router = fleet.fleet_plan(["x"], {}, sys.executable, 2, "0,1", "127.0.0.1", router_port, "round_robin")
    router.argv[router.argv.index("--worker-urls") + 1 : router.argv.index("--policy")] = [
        r.url for r in replicas
    ]
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"fleet": json.loads(fleet.plan_json(replicas, router))}))
    proc = subprocess.Popen(
        [sys.executable, "-m", "exactlaunch.fleet", str(plan), str(tmp_path / "logs")],
        stderr=(tmp_path / "fleet.log").open("wb"),
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            if get(f"{router.url}/workers"):
                break
        except OSError:
            pass
        assert proc.poll() is None, (tmp_path / "fleet.log").read_text()
        assert time.monotonic() < deadline, (tmp_path / "fleet.log").read_text()
        time.sleep(0.5)
    try:
        yield router.url, [r.url for r in replicas], proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=60)


def bitexact(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bitexact", *args], capture_output=True, text=True)


@needs_router
def test_bitexact_through_the_real_router_names_the_workers_and_finds_one_answer(
    running_fleet: tuple[str, list[str], subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    router, replicas, _ = running_fleet
    out = str(tmp_path)
    repeat = bitexact(
        "repeat", f"sglang+{router}", *f"--repeats 4 --batch 8 --limit 6 --out {out}/r --json".split()
    )
    assert repeat.returncode == 0, repeat.stderr
    assert json.loads(repeat.stdout)["divergent"] == 0
    again = bitexact(
        "repeat", f"sglang+{router}", *f"--repeats 4 --batch 8 --limit 6 --out {out}/r --json".split()
    )
    assert again.returncode == 0 and not (tmp_path / "r" / "replaced").exists(), (
        again.stderr
    )  # same key: resumed
    both = (f"sglang+{router}", f"sglang+{replicas[0]}")  # 8 in flight through the router, 1 on replica 0
    parity = bitexact(
        "parity", *both, *f"--inflight-a 8 --inflight-b 1 --limit 6 --out {out}/p --json".split()
    )
    assert parity.returncode == 0, parity.stderr
    summary = json.loads(parity.stdout)
    assert summary["differ"] == 0 and summary["equal"] == 6
    identity = summary["a"]["identity"]
    # the workers' build, not the router's own counts
    assert identity["router_workers"] == sorted(replicas)  # in a fixed order: it keys resumable results
    assert identity["version"] == "0.5.20" and identity["model_path"] == "Qwen/Qwen3.8-27B"


@needs_router
def test_a_replica_that_dies_stops_the_fleet(
    running_fleet: tuple[str, list[str], subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    router, replicas, proc = running_fleet
    port = replicas[1].rsplit(":", 1)[1]
    found = subprocess.run(
        ["pgrep", "-f", f"checkhelpers.canned_sglang --port {port}"], capture_output=True, text=True
    )
    os.kill(int(found.stdout.split()[0]), signal.SIGKILL)
    assert proc.wait(timeout=30) == 2
    with pytest.raises(OSError):
        get(f"{router}/workers")
    with pytest.raises(OSError):
        get(f"{replicas[0]}/health")
