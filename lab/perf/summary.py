"""The tables docs/performance.md holds, from a results folder: decode rate and time to first token per
server, exact over stock, bench against profile, where the GPU time goes per cycle at every profiled
context, one prefill GEMM by GEMM, prefix reuse, and the target-card estimate (a model, labelled so)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lab.perf import breakdown, prefill, reuse, target_estimate
from lab.perf.perf_servers import SERVERS, accept_len, speculation_phrase
from lab.perf.results_layout import PROFILE_PROMPT, bench_rows, breakdown_files, load_json
from lab.perf.run_errors import RunError


def meta_line(meta: dict[str, Any]) -> str:
    """The server's own account of speculation in one line (older meta.json kept the full float)."""
    info = meta["meta_info"]
    if not int(info.get("spec_verify_ct") or 0):
        return "no verify steps"
    return speculation_phrase(info, meta["expected_accept_length"])


def consistency(
    benches: dict[str, list[dict[str, Any]]], breakdowns: dict[str, Any], length: int = PROFILE_PROMPT
) -> list[str]:
    """The bench's decode rate against the profile's cycle: the two must describe the same server."""
    lines = []
    for n, result in breakdowns.items():
        row = next((r for r in benches.get(n, []) if r["prompt_tokens"] == length), None)
        if not result or not row:
            continue
        tokens = accept_len(SERVERS[n]) or 1.0
        if not lines:
            lines += [
                "",
                f"Bench against profile at {length} prompt tokens (a cycle: one speculative iteration or "
                "one decode step; kernel sum exceeds busy time where kernels of two streams overlap):",
                "",
                "| server | tokens per cycle | bench ms per cycle | profiled span ms | profiled busy ms | "
                "kernel sum ms |",
                "|---|---:|---:|---:|---:|---:|",
            ]
        per = result["per_cycle_us"]
        lines.append(
            f"| {n} | {tokens:g} | {1000 * tokens / row['decode_tps']:.1f} | {per['span'] / 1000:.1f} | "
            f"{per['busy'] / 1000:.1f} | {per['total'] / 1000:.1f} |"
        )
    return lines


PAIRS = (("exact-spec", "stock-spec"), ("exact-no-spec", "stock-no-spec"))


def ratio_lines(benches: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Exact over stock at each length, for each pair measured: decode t/s and time to first token."""
    pairs = [(e, s) for e, s in PAIRS if benches.get(e) and benches.get(s)]
    if not pairs:
        return []
    lines = [
        "",
        "Exact over stock, side by side in this run (decode t/s ratio: higher is better for exact; TTFT "
        "ratio: lower is better):",
        "",
        "| prompt tokens | " + " | ".join(f"{e}/{s} t/s | {e}/{s} TTFT" for e, s in pairs) + " |",
        "|---:|" + "---:|---:|" * len(pairs),
    ]
    lengths = sorted({r["prompt_tokens"] for e, s in pairs for r in benches[e] + benches[s]})
    for length in lengths:
        cells = []
        for e, s in pairs:
            a = next((r for r in benches[e] if r["prompt_tokens"] == length), None)
            b = next((r for r in benches[s] if r["prompt_tokens"] == length), None)
            cells += [_ratio(a, b, "decode_tps"), _ratio(a, b, "ttft_s")]
        lines.append(f"| {length} | " + " | ".join(cells) + " |")
    return lines


def _ratio(a: dict[str, Any] | None, b: dict[str, Any] | None, key: str) -> str:
    return f"{a[key] / b[key]:.2f}" if a and b and b[key] else "-"


def prefill_lines(prefills: dict[str, Any]) -> list[str]:
    """Each server's profiled prefill, then exact against stock GEMM by GEMM for each pair measured."""
    found = {n: p for n, p in prefills.items() if p}
    if not found:
        return []
    lines = ["## One prefill, GEMM by GEMM", ""]
    for n, p in found.items():
        lines.append(prefill.markdown(p, f"{n}: {SERVERS[n].description}"))
    for e, s in PAIRS:
        if e in found and s in found:
            lines += [f"### {e} against {s}", "", prefill.compare(found[e], found[s], (e, s))]
    return lines


def summarize(results: Path) -> str:
    servers = {name: results / name for name in SERVERS if (results / name).is_dir()}
    if not servers:
        raise RunError(
            f"{results}: no server folders ({', '.join(SERVERS)}); unpack perf-*.tar.gz there first"
        )
    benches = {name: bench_rows(folder) for name, folder in servers.items()}
    metas = {name: load_json(folder, "meta.json") for name, folder in servers.items()}
    profiled = {
        name: {n: json.loads(path.read_text()) for n, path in breakdown_files(folder).items()}
        for name, folder in servers.items()
    }
    lengths_profiled = sorted({n for per in profiled.values() for n in per})
    breakdowns = {name: per.get(PROFILE_PROMPT) for name, per in profiled.items()}
    lengths = sorted({r["prompt_tokens"] for rows in benches.values() for r in rows})
    names = list(servers)
    # a section only where something was measured (the radix servers measure reuse alone)
    lines = ["## Decode rate and time to first token (single stream)", ""] if lengths else []
    lines += [
        "| prompt tokens | " + " | ".join(f"{n} t/s | {n} TTFT s" for n in names) + " |",
        "|---:|" + "---:|---:|" * len(names),
    ] if lengths else []  # fmt: skip
    for length in lengths:
        cells = []
        for n in names:
            row = next((r for r in benches[n] if r["prompt_tokens"] == length), None)
            cells += [f"{row['decode_tps']:.1f}", f"{row['ttft_s']:.2f}"] if row else ["-", "-"]
        lines.append(f"| {length} | " + " | ".join(cells) + " |")
    lines.append("")
    for n in names:
        meta = metas[n]
        if meta:
            lines.append(f"- {n} ({SERVERS[n].description}): {meta_line(meta)}.")
    lines += ratio_lines(benches)
    lines += consistency(benches, breakdowns)
    if any(breakdowns.values()):
        lines += ["", "## Where the GPU time goes, per cycle", ""]
        lines += breakdown_sections(names, breakdowns)
    for length in (n for n in lengths_profiled if n != PROFILE_PROMPT):
        at = {name: per.get(length) for name, per in profiled.items()}
        lines += consistency(benches, at, length)
        lines += ["", f"## Where the GPU time goes, per cycle, at {length} tokens of context", ""]
        lines += breakdown_sections(names, at)
    if len(lengths_profiled) > 1:
        lines += every_length_table(names, profiled)
    lines += prefill_lines({name: load_json(folder, "prefill.json") for name, folder in servers.items()})
    reused = {name: found for name, folder in servers.items() if (found := load_json(folder, "reuse.json"))}
    if reused:
        lines += [""] if lines and lines[-1] else []
        lines += ["## Prefix reuse: time to the first token, shared prefix cached vs computed afresh", ""]
        lines += [reuse.markdown(reused), ""]
    spec_profiles = profiled.get("exact-spec", {})
    if len(lengths_profiled) > 1 and len(spec_profiles) > 1:
        cycles = {
            n: {c: r["per_cycle_us"][c] for c in target_estimate.COMPONENTS} for n, r in spec_profiles.items()
        }
        lines += ["## Target card at every profiled context: a model, not a measurement", ""]
        lines.append(target_estimate.rate_markdown(cycles, accept_len(SERVERS["exact-spec"]) or 1.0))
    for length in lengths_profiled:
        exact, stock = profiled.get("exact-spec", {}).get(length), profiled.get("stock-spec", {}).get(length)
        if not (exact and stock):
            continue
        e_us = {c: exact["per_cycle_us"][c] for c in target_estimate.COMPONENTS}
        s_us = {c: stock["per_cycle_us"][c] for c in target_estimate.COMPONENTS}
        heading = "## Target card: a model, not a measurement"
        lines += [heading if length == PROFILE_PROMPT else f"{heading} ({length} tokens of context)", ""]
        for route in (target_estimate.ROUTE_OVER_CUBLAS, None):
            est = target_estimate.estimate(e_us, s_us, route_over_cublas=route)
            lines.append(target_estimate.markdown(est, e_us, s_us))
    return "\n".join(lines).rstrip() + "\n"


def breakdown_sections(names: list[str], breakdowns: dict[str, Any]) -> list[str]:
    lines = []
    for n in names:
        if breakdowns.get(n):
            tokens = accept_len(SERVERS[n]) or 1.0
            lines.append(breakdown.markdown(breakdowns[n], f"{n}: {SERVERS[n].description}"))
            why = "simulated accept length" if SERVERS[n].speculative else "plain decode"
            per_token = breakdowns[n]["per_cycle_us"]["total"] / tokens
            lines.append(
                f"Tokens per cycle: {tokens:g} ({why}); GPU kernel time per output token "
                f"{per_token:.1f} us.\n"
            )
    return lines


def every_length_table(names: list[str], profiled: dict[str, dict[int, Any]]) -> list[str]:
    """One row per server and profiled context: the components per cycle and attention by step."""
    lines = [
        "## Per cycle at every profiled context (us; attention split by step)",
        "",
        "| server | context tokens | gemm | gdn | attention | rest | total | DRAFT attention "
        "| VERIFY attention |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for n in names:
        for length, result in profiled[n].items():
            us, by_step = result["per_cycle_us"], result["by_step_us"]
            steps = [by_step.get(k, {}).get("attention") for k in ("DRAFT", "VERIFY")]
            cells = [f"{us[c]:.1f}" for c in (*breakdown.COMPONENTS, "total")]
            cells += ["-" if v is None else f"{v:.1f}" for v in steps]
            lines.append(f"| {n} | {length} | " + " | ".join(cells) + " |")
    return [*lines, ""]
