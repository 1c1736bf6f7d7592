"""The drift history from real checks: a golden recorded from a tiny transformers model on CPU, checked by
the same engine (EQUAL) and by a batched one (batching moves float32 logprobs on CPU: a real drift), each
with the build the launcher would describe; the page rendered, read back and shown in headless chromium."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from bitexact import drift, history
from bitexact.cli import main
from bitexact.errors import UsageError

RECIPE = ["--recipe-name", "tiny-recipe", "--max-new-tokens", "6", "--top-logprobs", "3"]
BUILD_A = {"sglang": "0.5.20", "sglang.patches": "0001 0002 0003 0004 0005", "torch": "2.11.0"}
BUILD_B = {**BUILD_A, "sglang.patches": "0001 0002 0003 0004", "triton": "3.6.0"}


@pytest.fixture
def card_history(models, prompt_file, tmp_path, capsys) -> dict[str, Path]:
    """record (build A), check by the same engine (build A), check by a batched engine (build B)."""
    engine = f"hf:{models['target']}"
    golden_dir = tmp_path / "golden"
    info_a, info_b = tmp_path / "a.json", tmp_path / "b.json"
    info_a.write_text(json.dumps(BUILD_A))
    info_b.write_text(json.dumps(BUILD_B))
    common = [*RECIPE, "--prompts", str(prompt_file), "--golden-dir", str(golden_dir), "--card", "test-card"]
    record = ["golden", "record", engine, *common, "--new-card", "--build-info", str(info_a)]
    assert main([*record, "--out", str(tmp_path / "r")]) == 0
    check = ["golden", "check", engine, *common, "--out", str(tmp_path / "c1"), "--build-info", str(info_a)]
    assert main(check) == 0
    batched = ["golden", "check", f"{engine}?batch=3", *common, "--build-info", str(info_b)]
    assert main([*batched, "--out", str(tmp_path / "c2")]) == 1
    capsys.readouterr()
    return {"golden_dir": golden_dir, "history": golden_dir / "test-card" / "history.jsonl", "tmp": tmp_path}


def test_every_record_and_check_appends_one_line(card_history):
    lines = history.load(card_history["history"])
    assert [line["verdict"] for line in lines] == ["RECORDED", "EQUAL", "DIFFERENT"]
    recorded, equal, moved = lines
    assert recorded["build"] == equal["build"]  # the same engine and build: one build
    assert recorded["golden"]["digest"] == moved["golden"]["digest"]
    assert equal["golden"]["build"] == recorded["build"]["label"]
    parts = moved["build"]["components"]
    assert parts["build.sglang.patches"] == BUILD_B["sglang.patches"] and parts["engine.batch"] == "3"
    assert parts["engine.torch"] and parts["bitexact"]
    first = moved["first_divergence"]
    assert moved["touched"] and len(moved["touched"]) == moved["prompts"] - moved["equal"]
    assert first["prompt"] in moved["touched"] and first["position"] >= 0
    assert isinstance(first["margin"], float) and first["differs_in"]


def test_the_page_names_the_builds_what_changed_and_where_bits_moved(card_history, capsys):
    out = card_history["tmp"] / "page"
    args = ["history", "test-card", "--golden-dir", str(card_history["golden_dir"]), "--out", str(out)]
    assert main([*args, "--diff", "B1", "B2"]) == 0
    printed = capsys.readouterr().out
    assert "patch series: 5 patches -> 4 patches (without 0005)" in printed
    assert "build.triton: - -> 3.6.0" in printed and "engine.batch: 1 -> 3" in printed
    assert (
        "history: DRIFT: 1 of 2 checks differ from their golden, over 2 build(s); first at check 3" in printed
    )
    markdown = (out / "history-test-card.md").read_text()
    assert "**DRIFT: 1 of 2 checks" in markdown and "| B2 |" in markdown
    assert "## Components: A = B1, B = B2" in markdown
    page = (out / "history-test-card.html").read_text()
    assert page.count('class="point verdict-') == 3 and page.count('class="build-change"') == 2


def test_diff_by_check_number_and_by_label(card_history, capsys):
    found = drift.analyse("test-card", history.load(card_history["history"]))
    assert [b.name for b in found.builds] == ["B1", "B2"] and found.builds[0].checks == [1, 2]
    assert drift.diff(found, "1", "2")["changes"] == []
    label = found.builds[1].label
    assert drift.diff(found, "#1", label)["b"] == "B2"
    # a prefix of digits only is a label's when no check has that number
    digits = drift.Build(9, "123456abcdef", {"x": "1"}, 1, "-")
    assert drift.resolve(drift.Drift("c", found.checks, [*found.builds, digits]), "1234")[0] == "B9"
    with pytest.raises(UsageError, match=r"--diff 'B9' names no build of card 'test-card': give B1..B2"):
        drift.resolve(found, "B9")
    # `B9` past the last build is refused even where a label starts with "b9" (labels are hashes of the
    # build: the sandboxed run of this suite once drew one)
    b9 = drift.Build(3, "b9aa00000000", {"x": "1"}, 1, "-")
    with pytest.raises(UsageError, match=r"--diff 'B9' names no build"):
        drift.resolve(drift.Drift("test-card", found.checks, [*found.builds, b9]), "B9")
    assert drift.resolve(drift.Drift("c", found.checks, [*found.builds, b9]), "b9a")[0] == "B3"


def test_no_history_and_an_explicit_history(models, prompt_file, tmp_path, capsys):
    engine = f"hf:{models['target']}"
    common = [*RECIPE, "--prompts", str(prompt_file), "--golden-dir", str(tmp_path / "g"), "--card", "cpu"]
    assert main(["golden", "record", engine, *common, "--no-history", "--out", str(tmp_path / "o")]) == 0
    assert not (tmp_path / "g" / "cpu" / "history.jsonl").exists()
    elsewhere = tmp_path / "h" / "mine.jsonl"
    assert (
        main(["golden", "check", engine, *common, "--history", str(elsewhere), "--out", str(tmp_path / "o")])
        == 0
    )
    assert [line["verdict"] for line in history.load(elsewhere)] == ["EQUAL"]


def test_a_torn_or_foreign_line_is_skipped_and_named(card_history, capsys):
    path = card_history["history"]
    with path.open("a") as handle:
        handle.write('{"kind": "something-else"}\n{"kind": "bitexact-history", "sch')
    lines = history.load(path)
    err = capsys.readouterr().err
    assert len(lines) == 3
    assert "history.jsonl:4: not a history line; skipped" in err and "the last line is torn" in err


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{", r"--build-info .*: not JSON"),
        ('{"torch": {"version": "2"}}', r"must be one JSON object of names to strings"),
        (b"\xff", r"not UTF-8 text"),
    ],
)
def test_bad_build_info_is_named(tmp_path, content, message):
    path = tmp_path / "b.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(UsageError, match=message):
        history.read_build_info(path)


def test_history_of_a_card_without_one(tmp_path, capsys):
    assert main(["history", "h200", "--golden-dir", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    assert "no history for card 'h200' at" in capsys.readouterr().err


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.browser
@pytest.mark.skipif(
    CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium; .ci/run does)"
)
def test_the_page_renders_in_a_real_headless_browser(card_history, capsys):
    out = card_history["tmp"] / "page"
    assert (
        main(["history", "test-card", "--golden-dir", str(card_history["golden_dir"]), "--out", str(out)])
        == 0
    )
    page = out / "history-test-card.html"
    done = subprocess.run(
        [
            CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            f"--user-data-dir={card_history['tmp'] / 'profile'}", "--dump-dom", page.as_uri(),
        ],
        capture_output=True, text=True, timeout=120, env={**os.environ, "HOME": str(card_history["tmp"])},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    dom = done.stdout
    for marker in ('class="point verdict-recorded"', 'class="point verdict-different"', 'class="build-name"'):
        assert dom.count(marker) == page.read_text().count(marker) > 0, marker
    assert "DRIFT:" in dom and "<svg" in dom
