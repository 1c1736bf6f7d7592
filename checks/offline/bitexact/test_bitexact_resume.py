"""Resume keyed by the engine's identity as it reports itself: another build behind the same address never
reuses rows (they are moved aside, never deleted), transport options never throw a valid resume away,
and a line torn by a crash is neither glued to the next result nor lost silently."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from checkhelpers.bx_cli import parity_argv, rows, run
from checkhelpers.bx_fake_servers import Backend, FakeServer
from checkhelpers.bx_tiny_models import make_model


@pytest.fixture(scope="module")
def backend(models) -> Backend:
    return Backend(models["target"])


@pytest.fixture(scope="session")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("resume-models")
    return {"target": make_model(root / "target", layers=2, hidden=64, seed=0)}


def _a_side(out: Path) -> Path:
    (path,) = out.glob("A-*.jsonl")
    return path


@pytest.mark.parametrize(
    ("changed", "expected"),
    [
        ({"version": "0.5.21.dev3+g542a043"}, 'version: "0.5.20" -> "0.5.21.dev3+g542a043"'),
        ({"server_args": {"attention_backend": "flashinfer"}}, "server_args_sha256"),
    ],
)
def test_another_build_on_the_same_port_reuses_nothing(
    changed, expected, backend, models, prompt_file, tmp_path, capsys
):
    out = tmp_path / "o"
    with FakeServer(backend) as first:
        port = first.port
        argv = parity_argv(f"sglang+http://127.0.0.1:{port}", f"hf:{models['target']}", prompt_file, out)
        rc, _, _ = run(capsys, argv)
    assert rc == 0
    before = _a_side(out).read_text()
    with FakeServer(backend, port=port, **changed) as other:
        rc, summary, err = run(capsys, argv)
    assert rc == 0 and summary["equal"] == 6
    assert other.served == 6, "every prompt must be asked of the new build"
    assert "made by another engine identity or settings" in err and expected in err
    (moved,) = (out / "replaced").glob("A-*.jsonl")  # moved aside whole, never deleted
    assert moved.read_text() == before
    assert f"moved to {moved}" in err
    assert len(rows(_a_side(out))) == 6


def test_transport_options_and_a_restart_keep_a_valid_resume(backend, models, prompt_file, tmp_path, capsys):
    """`?retries=5&timeout=300` change how the client waits, not what the server computes; a restart of
    the same server draws a new random seed and startup time, which change nothing either."""
    out = tmp_path / "o"
    with FakeServer(backend) as first:
        port = first.port
        a = f"sglang+http://127.0.0.1:{port}"
        rc, _, _ = run(capsys, parity_argv(a, f"hf:{models['target']}", prompt_file, out))
        assert rc == 0
    with FakeServer(backend, port=port) as restarted:
        argv = parity_argv(f"{a}?retries=5&timeout=300", f"hf:{models['target']}", prompt_file, out)
        rc, summary, err = run(capsys, argv)
    assert rc == 0 and summary["equal"] == 6
    assert restarted.served == 0 and "(resumed)" in err
    assert not (out / "replaced").exists()


def test_changed_model_files_in_process_reuse_nothing(models, prompt_file, tmp_path, capsys):
    model = tmp_path / "model"
    shutil.copytree(models["target"], model)
    out = tmp_path / "o"
    argv = [
        "parity",
        f"hf:{model}",
        f"hf:{model}",
        "--allow-same-engine",
        "--prompts",
        str(prompt_file),
        "--limit",
        "2",
    ]
    argv += ["--max-new-tokens", "4", "--top-logprobs", "3", "--out", str(out)]
    assert run(capsys, argv)[0] == 0
    rc, _, err = run(capsys, argv)
    assert rc == 0 and "(resumed)" in err and "moved to" not in err
    other = make_model(tmp_path / "other", layers=2, hidden=64, seed=5)  # same shapes, other weights
    shutil.copy(other / "model.safetensors", model / "model.safetensors")
    rc, _, err = run(capsys, argv)
    assert rc == 0
    assert "model_files_sha256" in err and "moved to" in err and "(resumed)" not in err


def _row_id(row: dict) -> str | None:
    return row.get("id") or (row.get("generation") or {}).get("prompt_id")


def test_a_torn_last_line_is_cut_off_kept_aside_and_its_prompt_redone(
    backend, models, prompt_file, tmp_path, capsys
):
    out = tmp_path / "o"
    with FakeServer(backend) as server:
        argv = parity_argv(
            f"sglang+http://127.0.0.1:{server.port}", f"hf:{models['target']}", prompt_file, out
        )
        assert run(capsys, argv)[0] == 0
        path = _a_side(out)
        text = path.read_text()
        last = text.rstrip("\n").rsplit("\n", 1)[1]
        torn_id = _row_id(json.loads(last))
        path.write_text(text[: len(text) - len(last) // 2])  # a crash in the middle of the last write
        served = server.served
        rc, summary, err = run(capsys, argv)
        assert rc == 0 and summary["equal"] == 6
        assert server.served == served + 1  # only the torn prompt was asked again
    lines = [json.loads(line) for line in path.read_text().splitlines()]  # a glued line is not JSON
    assert [_row_id(r) for r in lines].count(torn_id) == 1
    assert "the last line was torn" in err and f"prompt {torn_id!r} is redone" in err
    (fragment,) = (out / "replaced").glob("A-*.torn")
    assert last.startswith(fragment.read_text())
