"""Reports that cannot hide a difference: exact values, delta and ULPs at the first divergence, the text
there, no Python reprs, plots with ticks whose x axis runs to max_new_tokens, HTML for every verb; each
report also rendered once in a real headless browser (Debian's chromium)."""

from __future__ import annotations

import json
import math
import os
import shutil
import struct
import subprocess
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest
from bitexact.cli import main
from bitexact.generation import Generation
from bitexact.golden import build_record, load_golden, write_record
from bitexact.prompts import ByteTokenizer
from bitexact.report.html import comparison_html
from bitexact.report.markdown import comparison_markdown
from bitexact.summary import comparison_summary

SVG = "{http://www.w3.org/2000/svg}"


def _f32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


def _next_f32(x: float, steps: int = 1) -> float:
    bits = struct.unpack("<i", struct.pack("<f", x))[0]
    return struct.unpack("<f", struct.pack("<i", bits + steps))[0]


def _pair(tokenizer: ByteTokenizer) -> tuple[Generation, Generation, float, float]:
    """Two answers to one prompt: the same text up to 'The cat', then the logprob of the next token
    differs by two float32 ULPs (six significant digits print both alike), then the tokens part."""
    ids_a = tokenizer.encode("The cat sat on the mat")
    ids_b = tokenizer.encode("The cat sat in a hat!!")
    lp = [_f32(-0.1 * (i + 1)) for i in range(len(ids_a))]
    a_val = _f32(-3.3816399574279785)
    b_val = _next_f32(a_val, 2)
    lp_a, lp_b = list(lp), list(lp)
    lp_a[7], lp_b[7] = a_val, b_val
    top = [[(t, v), (t + 1, v - 0.5)] for t, v in zip(ids_a, lp, strict=True)]
    a = Generation("p0", ids_a, lp_a, top)
    b = Generation("p0", ids_b, lp_b, [list(row) for row in top])
    return a, b, a_val, b_val


def _summary(tokenizer: ByteTokenizer | None = None, max_new_tokens: int = 64) -> dict:
    a, b, _, _ = _pair(ByteTokenizer())
    same = Generation("p1", [5, 6], [-0.5, -0.25], [[(5, -0.5), (6, -1.0)], [(6, -0.25), (5, -2.0)]])
    return comparison_summary(
        verb="parity",
        title="parity",
        a={
            "engine": "sglang+http://127.0.0.1:1",
            "variant": None,
            "identity": {"deterministic": True, "revision": None, "args": {"tp": 1}},
            "spec": None,
        },
        b={"engine": "hf:/m", "variant": "no-spec", "identity": {"engine": "hf"}},
        settings={"max_new_tokens": max_new_tokens, "top_logprobs": 2},
        gens_a=[a, same],
        gens_b=[b, same],
        tokenizer=tokenizer,
    )


def test_first_divergence_shows_exact_values_delta_ulps_and_text():
    from bitexact.compare import ulp_distance

    a, b, a_val, b_val = _pair(ByteTokenizer())
    assert f"{a_val:.6g}" == f"{b_val:.6g}"  # what the old report printed for both
    summary = _summary(ByteTokenizer())
    md = comparison_markdown(summary)
    page = comparison_html(summary)
    comp = summary["comparisons"][0]
    assert comp["first_divergence"] == 7 and comp["logprob_ulps"] == 2 and comp["ulp_format"] == "float32"
    assert comp["logprob_delta"] == abs(a_val - b_val)
    for report in (md, page):
        assert f"{a_val!r} / {b_val!r}" in report
        assert repr(abs(a_val - b_val)) in report and "2 (float32)" in report
        assert json.dumps("The cat").replace('"', "") in report  # the shared text before the divergence
    assert '`" sat on "`' in md and '`" sat in "`' in md
    assert ulp_distance(0.1, math.nextafter(0.1, 1.0)) == (1, "float64")


def test_no_python_reprs_in_reports():
    summary = _summary()
    for report in (comparison_markdown(summary), comparison_html(summary)):
        for repr_text in ("True", "False", "None", "{'", "': "):
            assert repr_text not in report, repr_text
    assert "deterministic=yes" in comparison_markdown(summary)


def _ticks(svg: ET.Element, axis: str) -> tuple[list[ET.Element], list[str]]:
    group = next(g for g in svg.iter(f"{SVG}g") if g.get("class") == axis)
    lines = [e for e in group.iter(f"{SVG}line") if e.get("class") == "tick"]
    labels = [e.text or "" for e in group.iter(f"{SVG}text") if e.get("class") == "tick-label"]
    return lines, labels


def _svg_of(page: str) -> ET.Element:
    start, end = page.index("<svg"), page.index("</svg>") + len("</svg>")
    return ET.fromstring(page[start:end])


def test_plot_has_ticks_and_its_x_axis_runs_to_max_new_tokens():
    from bitexact.report.svg import LEFT, PLOT_H, PLOT_W, TOP

    svg = _svg_of(comparison_html(_summary(max_new_tokens=64)))
    x_lines, x_labels = _ticks(svg, "x-axis")
    assert x_labels == ["0", "10", "20", "30", "40", "50", "64"] and len(x_lines) == len(x_labels)
    assert float(x_lines[-1].get("x1")) == LEFT + PLOT_W  # the axis ends at max_new_tokens
    y_lines, y_labels = _ticks(svg, "y-axis")
    assert len(y_lines) == len(y_labels) >= 3 and y_labels[0] == "0"
    (point,) = [c for c in svg.iter(f"{SVG}circle") if "point" in (c.get("class") or "")]
    assert float(point.get("cx")) == pytest.approx(LEFT + PLOT_W * 7 / 64, abs=0.05)
    assert TOP <= float(point.get("cy")) <= TOP + PLOT_H


# ---- every verb's reports, made by the CLI, rendered in a real browser ----


def _cli(argv: list[str]) -> int:
    return main(argv)


@pytest.fixture(scope="module")
def reports(tmp_path_factory, request) -> dict[str, Path]:
    """One report of each verb from real runs on tiny transformers models (CPU): parity and repeat
    with the divergences CPU batching causes, a golden record, a golden check with drift, a bench."""
    models = request.getfixturevalue("models")
    root = tmp_path_factory.mktemp("reports")
    prompts = root / "prompts.jsonl"
    from checkhelpers.bx_tiny_models import write_prompts

    write_prompts(prompts, [5, 23, 11, 40, 17, 31])
    t = f"hf:{models['target']}"
    common = [
        "--prompts",
        str(prompts),
        "--max-new-tokens",
        "8",
        "--top-logprobs",
        "3",
        "--tokenizer",
        "bytes:0",
    ]
    out = root / "out"
    assert _cli(["parity", t, f"{t}?batch=3", *common, "--out", str(out)]) == 1
    assert _cli(["repeat", t, "-n", "2", "-b", "2", *common, "--out", str(out)]) in (0, 1)
    golden = ["--recipe-name", "tiny", "--card", "test-card", "--golden-dir", str(root / "g")]
    assert (
        _cli(["golden", "record", t, *golden, *common, "--new-card", "--limit", "3", "--out", str(out)]) == 0
    )
    path = root / "g" / "test-card" / "tiny.json"
    g = load_golden(path, card="test-card", recipe="tiny")
    g.generations[1].logprobs[2] += 2.0**-20
    rec = g.record
    write_record(
        build_record(
            card=rec["card"],
            recipe=rec["recipe"],
            variant=rec["variant"],
            settings=rec["settings"],
            metadata=rec["metadata"],
            prompts=g.prompts,
            generations=g.generations,
        ),
        path,
    )
    check = [a for a in common if a not in ("--prompts", str(prompts))]
    assert _cli(["golden", "check", t, *golden, *check, "--out", str(out)]) == 1
    assert (
        _cli(
            [
                "bench",
                t,
                "--lengths",
                "16,64",
                "--new-tokens",
                "4",
                "--vocab-size",
                "384",
                "--warmup",
                "0",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    return {
        name: out / f"{name}.html" for name in ("parity", "repeat", "golden-record", "golden-check", "bench")
    }


def test_every_verb_writes_markdown_and_html(reports):
    for name, page in reports.items():
        assert page.is_file() and page.with_suffix(".md").is_file(), name
        text = page.read_text() + page.with_suffix(".md").read_text()
        for repr_text in ("True", "False", "None", "{'"):
            assert repr_text not in text, (name, repr_text)
        if "<svg" in text:
            svg = _svg_of(page.read_text())
            assert _ticks(svg, "x-axis")[1] and _ticks(svg, "y-axis")[1], name


class _Elements(HTMLParser):
    """Elements of a DOM the browser dumped: (tag, class) of each, and the SVGs' tick counts."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, dict(attrs).get("class") or ""))

    def count(self, tag: str, css: str = "") -> int:
        return sum(1 for t, c in self.found if t == tag and (not css or css in c.split()))


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.browser
@pytest.mark.skipif(
    CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium; .ci/run does)"
)
def test_reports_render_in_a_real_headless_browser(reports, tmp_path):
    for name, page in reports.items():
        profile = tmp_path / f"profile-{name}"
        done = subprocess.run(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--no-first-run",
                f"--user-data-dir={profile}",
                "--enable-logging=stderr",
                "--v=0",
                "--dump-dom",
                page.as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "HOME": str(tmp_path)},
        )
        assert done.returncode == 0, done.stderr[-2000:]
        assert "CONSOLE" not in done.stderr and "Uncaught" not in done.stderr, done.stderr[-2000:]
        dom = _Elements()
        dom.feed(done.stdout)
        written = _Elements()
        written.feed(page.read_text())
        assert ("h1", "") in dom.found and ("p", "verdict") in dom.found, name
        # the browser's DOM holds every tick, point and table row the report wrote
        for tag, css in (("line", "tick"), ("text", "tick-label"), ("circle", "point"), ("tr", "")):
            assert dom.count(tag, css) == written.count(tag, css), (name, tag, css)
        if name in ("parity", "golden-check", "bench"):
            assert dom.count("svg", "plot") == 1 and dom.count("line", "tick") >= 6, name


def test_every_report_leads_with_its_verdict_word(reports):
    words = {
        "parity": "DIFFERENT",
        "golden-check": "DIFFERENT",
        "golden-record": "RECORDED",
        "bench": "MEASURED",
    }
    for name, page in reports.items():
        word = words.get(name) or ("EQUAL" if "EQUAL: 0/" in page.read_text() else "DIFFERENT")
        for text in (page.read_text(), page.with_suffix(".md").read_text()):
            assert f"{word}: " in text or f"{word}:" in text, (name, word)
    repeat = reports["repeat"].with_suffix(".md").read_text()
    assert "| in token ids | in logprobs only |" in repeat and "in token ids," in repeat


def test_coinciding_points_are_drawn_once_with_their_count():
    from bitexact.report.svg import Point, scatter

    points = [Point(3.0, 0.5, "p0", "token-diverged"), Point(3.0, 0.5, "p1", "token-diverged")]
    points.append(Point(7.0, 0.25, "p2", "logprob-diverged"))
    svg = ET.fromstring(scatter(points, x_max=10, y_max=1.0, x_label="x", y_label="y"))
    circles = [c for c in svg.iter(f"{SVG}circle")]
    assert len(circles) == 2
    assert "coincident-2" in circles[0].get("class", "") and circles[0].findtext(f"{SVG}title") == "p0\np1"
    assert [t.text for t in svg.iter(f"{SVG}text") if t.get("class") == "count"] == ["\u00d72"]


def test_the_bench_plot_shows_the_recipes_figures_beside_the_measured_ones():
    from bitexact.report.html import bench_html

    reference = json.loads(
        (Path(__file__).resolve().parents[3] / "nix/recipes/qwen3.8-27b-exact.json").read_text()
    )
    rows = [{"prompt_tokens": 640, "new_tokens": 64, "runs": 1, "ttft_s": 0.1, "decode_tps": 90.0}]
    page = bench_html(
        {"title": "t", "engine": "e", "identity": {}, "rows": rows, "reference": reference["reference"]}
    )
    svg = _svg_of(page)
    names = [t.text for t in svg.iter(f"{SVG}text") if t.get("class") == "series-name"]
    assert names == [
        "measured",
        "exact (recipe)",
        "vllmNotExact (recipe)",
        "sglangStockNoSpec (recipe)",
    ] or sorted(names) == sorted(
        ["measured", "exact (recipe)", "vllmNotExact (recipe)", "sglangStockNoSpec (recipe)"]
    )
    titles = [t.text for t in svg.iter(f"{SVG}title")]
    assert "exact (recipe): 106.6 at 640" in titles and "measured: 90 at 640" in titles
    ys = sorted(float(t.get("y")) for t in svg.iter(f"{SVG}text") if t.get("class") == "series-name")
    assert all(b - a >= 13 for a, b in zip(ys, ys[1:], strict=False))  # names never overlap
