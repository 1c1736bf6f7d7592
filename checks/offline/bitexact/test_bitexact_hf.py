"""Parity and repeat against real transformers on CPU (tiny random models): what bitexact reports must
match an independent computation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bitexact.cli import main
from checkhelpers.bx_independent import first_difference, generate

NEW, K = 8, 5


def _rows(prompt_file: Path) -> list[list[int]]:
    return [json.loads(line)["input_ids"] for line in prompt_file.read_text().splitlines()]


def _parity(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict]:
    rc = main(["parity", *argv, "--max-new-tokens", str(NEW), "--top-logprobs", str(K), "--json"])
    out = capsys.readouterr().out
    return rc, json.loads(out) if out.strip() else {}


def test_plain_vs_plain_is_equal(models, prompt_file, tmp_path, capsys):
    t = models["target"]
    rc, summary = _parity(
        capsys,
        f"hf:{t}",
        f"hf:{t}",
        "--prompts",
        str(prompt_file),
        "--out",
        str(tmp_path / "o"),
        "--allow-same-engine",
    )
    assert rc == 0
    assert summary["equal"] == summary["prompts"] == 6
    assert summary["same_engine"] is True
    assert all(c["first_divergence"] is None for c in summary["comparisons"])
    assert (tmp_path / "o" / "parity.md").read_text().count("6/6 prompts equal") == 1
    assert "<svg" not in (tmp_path / "o" / "parity.html").read_text()  # nothing to plot


def test_plain_vs_assisted_detected_where_independent_run_differs(models, prompt_file, tmp_path, capsys):
    t, d = models["target"], models["draft"]
    rc, summary = _parity(
        capsys,
        f"hf:{t}",
        f"hf:{t}?assistant={d}",
        "--prompts",
        str(prompt_file),
        "--out",
        str(tmp_path / "o"),
    )
    rows = _rows(prompt_file)
    expected = [
        first_difference(generate(t, [r], NEW, K)[0], generate(t, [r], NEW, K, assistant_dir=d)[0])
        for r in rows
    ]
    assert any(e is not None for e in expected), "the fixture must make assisted decoding differ somewhere"
    assert [c["first_divergence"] for c in summary["comparisons"]] == expected
    assert rc == 1
    assert summary["b"]["spec"]["ran"] == 6  # the draft model's forward calls prove speculation ran
    html = (tmp_path / "o" / "parity.html").read_text()
    assert html.count("<circle") == sum(e is not None for e in expected)


def test_alone_vs_batched_detected_where_independent_run_differs(models, prompt_file, tmp_path, capsys):
    t = models["target"]
    rc, summary = _parity(
        capsys, f"hf:{t}", f"hf:{t}?batch=3", "--prompts", str(prompt_file), "--out", str(tmp_path / "o")
    )
    rows = _rows(prompt_file)
    alone = [generate(t, [r], NEW, K)[0] for r in rows]
    batched = generate(t, rows[:3], NEW, K) + generate(t, rows[3:], NEW, K)
    expected = [first_difference(x, y) for x, y in zip(alone, batched, strict=True)]
    assert any(e is not None for e in expected), "left padding in a batch must change numerics somewhere"
    assert [c["first_divergence"] for c in summary["comparisons"]] == expected
    assert rc == 1


def test_spec_required_but_absent_exits_2(models, prompt_file, tmp_path, capsys):
    t = models["target"]
    rc = main(
        [
            "parity",
            f"hf:{t}",
            f"hf:{t}",
            "--allow-same-engine",
            "--spec-a",
            "must",
            "--prompts",
            str(prompt_file),
        ]
        + ["--limit", "2"]
        + ["--max-new-tokens", "4", "--out", str(tmp_path / "o")]
    )
    assert rc == 2
    assert "speculation must run" in capsys.readouterr().err


def test_assistant_with_batch_is_usage_error(models, capsys):
    t, d = models["target"], models["draft"]
    assert main(["parity", f"hf:{t}?assistant={d}&batch=2", f"hf:{t}"]) == 2
    assert "one sequence at a time" in capsys.readouterr().err


def _repeat(capsys, engine: str, prompt_file: Path, out: Path, batch: int) -> tuple[int, dict]:
    rc = main(
        ["repeat", engine, "-n", "4", "-b", str(batch), "--prompts", str(prompt_file), "--limit", "2"]
        + ["--max-new-tokens", "4", "--top-logprobs", str(K), "--out", str(out), "--json"]
    )
    return rc, json.loads(capsys.readouterr().out)


def test_repeat_one_at_a_time_is_stable_on_cpu(models, prompt_file, tmp_path, capsys):
    rc, summary = _repeat(capsys, f"hf:{models['target']}", prompt_file, tmp_path / "o", batch=1)
    assert rc == 0
    assert (summary["compared"], summary["divergent"]) == (6, 0)


def test_repeat_in_batches_matches_row_to_row_differences(models, prompt_file, tmp_path, capsys):
    """Copies 0,1 share a batch, as do 2,3: copies 1 and 3 sit in row 1, and differ from copy 0 exactly
    when row 1 of a batch of identical rows differs from row 0 (CPU kernels need not be batch-invariant)."""
    t = models["target"]
    rc, summary = _repeat(capsys, f"hf:{t}", prompt_file, tmp_path / "o", batch=2)
    expected = []
    for row in _rows(prompt_file)[:2]:
        first, second = generate(t, [row, row], 4, K)
        differs = first_difference(first, second)
        tokens_differ = bool((first[0] != second[0]).any())
        expected.append(
            {
                "prompt_id": f"p{len(expected)}",
                "compared": 3,
                "divergent": 0 if differs is None else 2,
                "token_divergent": 2 if tokens_differ else 0,
                "positions": [] if differs is None else [differs, differs],
            }
        )
    assert summary["per_prompt"] == expected
    assert rc == (1 if any(e["divergent"] for e in expected) else 0)


def test_bench_reports_each_length(models, tmp_path, capsys):
    rc = main(
        ["bench", f"hf:{models['target']}", "--lengths", "16,64", "--new-tokens", "4", "--vocab-size", "384"]
        + ["--warmup", "0", "--json"]
    )
    summary = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert [r["prompt_tokens"] for r in summary["rows"]] == [16, 64]
    assert all(r["new_tokens"] == 4 and r["ttft_s"] > 0 and r["decode_tps"] > 0 for r in summary["rows"])
