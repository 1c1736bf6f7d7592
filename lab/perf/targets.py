"""Issue 26's targets, judged from one results folder of `lab/perf/run.py measure` (one campaign, the
servers side by side on one card). Each target names the servers and lengths it reads; a target whose
inputs were not measured says so and is neither met nor missed.

    python -m lab.perf.targets RESULTS [--markdown FILE]

The table is what docs/performance.md holds under "Against the issue's targets"
(lab/tests/test_perf_targets.py re-derives it from the committed results).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.perf import results_layout  # beside this file: the results folder's layout and readers
from lab.perf.perf_servers import SERVERS

Rows = dict[str, dict[int, dict[str, float]]]  # server -> prompt tokens -> bench row
Cycles = dict[str, dict[int, dict[str, Any]]]  # server -> profiled context -> breakdown


class Missing(Exception):
    """An input of a target was not measured in this folder."""


@dataclass(frozen=True)
class Reading:
    text: str  # the measured value(s) as the page prints them
    met: bool


@dataclass(frozen=True)
class Target:
    text: str
    judge: Callable[[Rows, Cycles, str], Reading]  # the speculative server judged is the third argument


def _row(rows: Rows, server: str, length: int) -> dict[str, float]:
    try:
        return rows[server][length]
    except KeyError:
        raise Missing(f"{server} at {length} tokens") from None


def _cycle(cycles: Cycles, server: str, length: int) -> dict[str, Any]:
    try:
        return cycles[server][length]
    except KeyError:
        raise Missing(f"{server}'s profile at {length} tokens") from None


def _rate_ratio(minimum: float, top: tuple[str | None, int], bottom: tuple[str, int]) -> Target:
    """rate(top) / rate(bottom) >= minimum; a top server of None is the judged speculative server."""

    def judge(rows: Rows, cycles: Cycles, spec: str) -> Reading:
        a = _row(rows, top[0] or spec, top[1])["decode_tps"]
        b = _row(rows, bottom[0], bottom[1])["decode_tps"]
        return Reading(f"{a / b:.3f} ({a:.1f} / {b:.1f} t/s)", a / b >= minimum)

    if top[0] is None:
        return Target(f"rate at {top[1]} >= {minimum} x {bottom[0]}'s at {bottom[1]}", judge)
    return Target(f"{top[0]} at {top[1]} >= {minimum} x {bottom[0]} at {bottom[1]}", judge)


def _own_ratio(minimum: float, length: int) -> Target:
    """The judged server's rate at LENGTH over its own 2200-token rate (exact-spec's where the judged
    server was not measured at 2200: the window variant)."""

    def judge(rows: Rows, cycles: Cycles, spec: str) -> Reading:
        base = spec if 2200 in rows.get(spec, {}) else "exact-spec"
        a = _row(rows, spec, length)["decode_tps"]
        b = _row(rows, base, 2200)["decode_tps"]
        over = "" if base == spec else f" (over {base}'s 2200 rate)"
        return Reading(f"{a / b:.3f} ({a:.1f} / {b:.1f} t/s){over}", a / b >= minimum)

    return Target(f"rate at {length} >= {minimum} x its own 2200-token rate", judge)


def _draft_attention(limit_us: float) -> Target:
    def judge(rows: Rows, cycles: Cycles, spec: str) -> Reading:
        us = _cycle(cycles, spec, 131072)["by_step_us"]["DRAFT"]["attention"]
        return Reading(f"{us / 1000:.2f} ms per cycle", us <= limit_us)

    return Target(f"drafter attention per cycle at 131072 <= {limit_us / 1000:g} ms", judge)


def _verify_attention(factor: float) -> Target:
    def judge(rows: Rows, cycles: Cycles, spec: str) -> Reading:
        verify = _cycle(cycles, spec, 131072)["by_step_us"]["VERIFY"]["attention"]
        decode = _cycle(cycles, "exact-no-spec", 131072)["per_cycle_us"]["attention"]
        return Reading(
            f"{verify / decode:.2f} x ({verify / 1000:.2f} ms against {decode / 1000:.2f} ms a decode step)",
            verify <= factor * decode,
        )

    return Target(f"verify attention at 131072 <= {factor} x one exact decode step's attention", judge)


def _against_stock(key: str, bound: float, lengths: tuple[int, ...]) -> Target:
    """exact over stock, the judged speculative server against stock-spec, at each of LENGTHS: a length
    either did not measure is named, never left out."""

    def judge(rows: Rows, cycles: Cycles, spec: str) -> Reading:
        ratios = [_row(rows, spec, n)[key] / _row(rows, "stock-spec", n)[key] for n in lengths]
        ok = all(r >= bound for r in ratios) if key == "decode_tps" else all(r <= bound for r in ratios)
        cells = " / ".join(f"{r:.3f}" for r in ratios)
        return Reading(f"{cells} at {' / '.join(map(str, lengths))}", ok)

    what = "rate >=" if key == "decode_tps" else "TTFT <="
    return Target(f"{what} {bound} x stock-spec's at {', '.join(map(str, lengths))}", judge)


TARGETS: tuple[Target, ...] = (
    _rate_ratio(3.0, (None, 131072), ("exact-no-spec", 131072)),
    _own_ratio(0.65, 131072),
    _own_ratio(0.85, 32768),
    _draft_attention(3000.0),
    _verify_attention(1.5),
    _against_stock("decode_tps", 1.0, (640, 2200, 32768, 131072)),  # "at every length" the bench ran
    _against_stock("ttft_s", 1.05, (2200, 32768, 131072)),
    _rate_ratio(0.97, ("exact-no-spec", 640), ("stock-no-spec", 640)),
)


def load(results: Path) -> tuple[Rows, Cycles]:
    """Every server's bench rows by prompt length and its profiles by context, read from RESULTS as
    `run.py summarize` reads them."""
    servers = [results / name for name in SERVERS if (results / name).is_dir()]
    rows: Rows = {f.name: {r["prompt_tokens"]: r for r in results_layout.bench_rows(f)} for f in servers}
    cycles: Cycles = {}
    for f in servers:
        cycles[f.name] = {
            n: json.loads(path.read_text()) for n, path in results_layout.breakdown_files(f).items()
        }
    if not any(rows.values()):
        raise SystemExit(f"targets: {results} holds no bench results (server folders with bench*.json)")
    return rows, cycles


def judge_all(rows: Rows, cycles: Cycles, spec: str) -> list[tuple[Target, Reading | None, str]]:
    out: list[tuple[Target, Reading | None, str]] = []
    for target in TARGETS:
        try:
            out.append((target, target.judge(rows, cycles, spec), ""))
        except Missing as missing:
            out.append((target, None, str(missing)))
    return out


def markdown(results: Path) -> str:
    """The targets judged for exact-spec (the recipe) and, where measured, the draft-window variant."""
    rows, cycles = load(results)
    specs = [s for s in ("exact-spec", "exact-spec-window") if rows.get(s)]
    if not specs:
        raise SystemExit(f"targets: {results} has no exact speculative server (exact-spec)")
    head = "| target | " + " | ".join(f"{s} | met" for s in specs) + " |"
    lines = [head, "|---|" + "---|---|" * len(specs)]
    judged = {s: judge_all(rows, cycles, s) for s in specs}
    for i, target in enumerate(TARGETS):
        cells = []
        for s in specs:
            _, reading, missing = judged[s][i]
            cells += (
                [f"not measured ({missing})", "-"]
                if reading is None
                else [
                    reading.text,
                    "yes" if reading.met else "no",
                ]
            )
        lines.append(f"| {target.text} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("results", type=Path, help="a results folder of lab/perf/run.py measure")
    parser.add_argument("--markdown", type=Path, help="also write the table here")
    args = parser.parse_args(argv)
    if not args.results.is_dir():
        print(
            f"targets: {args.results} is not a folder (a results folder of run.py measure)", file=sys.stderr
        )
        return 2
    text = markdown(args.results)
    if args.markdown:
        args.markdown.write_text(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
