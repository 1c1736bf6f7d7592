"""A model, not a measurement: the recipe card's exact-vs-stock cost per component, from H200 profiles.

The H200 cannot run the recipe's card, so issue 11 asks for an estimate, labelled as one. The model:

1. Each component's GPU time per cycle (lab/perf/breakdown.py: GEMM, GDN, attention, rest) is scaled
   from the H200 to the target card by one factor: the bandwidth ratio (H200 / target) for components
   that stream memory at single-stream batch sizes (GEMMs read the weights, GDN reads and writes its
   recurrent state, attention reads the KV cache), the SM-count ratio (H200 / target) for the rest (small
   kernels whose time is set by how much of the card they can occupy). `BOUNDS` holds that choice.
2. GEMMs are the exception the issue names: on the H200 the exact server's GEMMs run SGLang's
   batch-invariant persistent Triton kernel (before patch 0005) or the exact GEMM route of patch 0005
   (sm_90 only), neither of which is the target card's path. There, exact GEMMs with M <= 16 take the
   small-M route (patch 0004; the exact GEMM route is off on sm_120, its bits unproven there). So the
   exact GEMM time on the target is modelled as the stock GEMM time times `route_over_cublas`, the route's
   time relative to cuBLAS, 1.0 by default: on the H200 the shipped route (its rule fitted to the H200
   sweep) took 0.947x to 1.015x of cuBLAS's time on the nine shapes of at least 2 x L2 (docs/kernels.md,
   "Results on the H200"; the first route: 0.95x to 1.06x on the shapes of 63 MB and more, 1.45x to 1.6x
   on the launch-bound (96, 5120), "Small-M route: GPU time"). With `route_over_cublas=None` the H200's
   own exact GEMM time is kept instead (an upper bound, reported separately).

Because a component's exact and stock times get the same factor, its ratio is the H200's (GEMM aside);
what the model moves is the weight of each component in the total. `estimate` also returns the total ratio
with one factor for everything (no reweighting), so the spread between the two shows how much the
bandwidth/SM assignment matters.

Card figures (each cited): H200, 132 SMs (docs/cards.md, as the lent card reported it) and 4255 GB/s, an
eager 4 GiB device-to-device copy measured on the lent card (docs/kernels.md); the recipe's card, RTX PRO 6000
Blackwell Max-Q Workstation Edition, 188 SMs (docs/cards.md sources) and 1792 GB/s, 512-bit GDDR7 at
28 Gbps, the same memory on all three RTX PRO 6000 variants (NVIDIA's launch figures as GTC 2025 coverage
reports them: gpu.name/VideoCardz "Memory Bus: 512-bit, Memory Bandwidth: 1,792 GB/s"; overclockers.ru
"188 SM ... 512-bit ... 1792 GB/s"; NVIDIA's datasheet itself was not reachable from here,
docs/performance.md lists the pages). One is a measured copy, the other a datasheet peak: the model
inherits that mismatch (with the H200's datasheet 4.8 TB/s the bandwidth factor would be 2.68 instead of
2.37; it cancels in every per-component ratio and only moves the reweighting).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

COMPONENTS = ("gemm", "gdn", "attention", "rest")


@dataclass(frozen=True)
class Card:
    name: str
    sm_count: int
    bandwidth_gbs: float
    source: str


H200 = Card(
    "NVIDIA H200 (lent)",
    132,
    4255.0,
    "132 SMs (docs/cards.md); 4255 GB/s: eager device-to-device copy, read + write (docs/kernels.md)",
)
RTX_PRO_6000_MAX_Q = Card(
    "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition",
    188,
    1792.0,
    "188 SMs (docs/cards.md); 1792 GB/s: 512-bit GDDR7 x 28 Gbps, launch figures (docs/performance.md)",
)
BOUNDS: Mapping[str, str] = {"gemm": "bandwidth", "gdn": "bandwidth", "attention": "bandwidth", "rest": "sm"}
ROUTE_OVER_CUBLAS = 1.0


def factor(bound: str, source: Card, target: Card) -> float:
    """How much longer a component takes on `target` than on `source` under the model."""
    if bound == "bandwidth":
        return source.bandwidth_gbs / target.bandwidth_gbs
    if bound == "sm":
        return source.sm_count / target.sm_count
    raise ValueError(f"bound {bound!r}: use 'bandwidth' or 'sm'")


@dataclass
class Estimate:
    exact_us: dict[str, float]
    stock_us: dict[str, float]
    ratio: dict[str, float]  # per component, exact / stock, on the target (model)
    total_ratio: float
    total_ratio_one_factor: float  # every component scaled alike: the H200 mix, GEMM substituted
    factors: dict[str, float]
    route_over_cublas: float | None
    source: Card
    target: Card
    bounds: dict[str, str] = field(default_factory=dict)


def _check(times: Mapping[str, float], what: str) -> None:
    missing = [c for c in COMPONENTS if c not in times]
    if missing:
        raise ValueError(f"{what}: no time for {', '.join(missing)} (give {', '.join(COMPONENTS)})")
    negative = [c for c in COMPONENTS if times[c] < 0]
    if negative:
        raise ValueError(f"{what}: negative time for {', '.join(negative)}")


def _ratio(a: float, b: float) -> float:
    return a / b if b > 0 else float("inf") if a > 0 else 1.0


def estimate(
    exact_source_us: Mapping[str, float],
    stock_source_us: Mapping[str, float],
    *,
    route_over_cublas: float | None = ROUTE_OVER_CUBLAS,
    source: Card = H200,
    target: Card = RTX_PRO_6000_MAX_Q,
    bounds: Mapping[str, str] = BOUNDS,
) -> Estimate:
    """The model's target-card times (us per cycle) and exact/stock ratios from H200 times per cycle."""
    _check(exact_source_us, "exact")
    _check(stock_source_us, "stock")
    factors = {c: factor(bounds[c], source, target) for c in COMPONENTS}
    exact = {c: exact_source_us[c] * factors[c] for c in COMPONENTS}
    stock = {c: stock_source_us[c] * factors[c] for c in COMPONENTS}
    exact_source = dict(exact_source_us)
    if route_over_cublas is not None:
        exact["gemm"] = stock["gemm"] * route_over_cublas
        exact_source["gemm"] = stock_source_us["gemm"] * route_over_cublas
    return Estimate(
        exact_us=exact,
        stock_us=stock,
        ratio={c: _ratio(exact[c], stock[c]) for c in COMPONENTS},
        total_ratio=_ratio(sum(exact.values()), sum(stock.values())),
        total_ratio_one_factor=_ratio(
            sum(exact_source[c] for c in COMPONENTS), sum(stock_source_us[c] for c in COMPONENTS)
        ),
        factors=factors,
        route_over_cublas=route_over_cublas,
        source=source,
        target=target,
        bounds=dict(bounds),
    )


def markdown(
    est: Estimate, exact_source_us: Mapping[str, float], stock_source_us: Mapping[str, float]
) -> str:
    gemm_note = (
        f"exact GEMM = stock GEMM x {est.route_over_cublas:g} (small-M route vs cuBLAS)"
        if est.route_over_cublas is not None
        else "exact GEMM = the H200's own exact GEMM time, scaled (not the target's path)"
    )
    lines = [
        f"**A model, not a measurement** ({est.source.name} -> {est.target.name}; {gemm_note}).",
        "",
        "| component | H200 exact us | H200 stock us | H200 exact/stock | scaled by | factor "
        "| target exact us (model) | target stock us (model) | target exact/stock (model) |",
        "|---|---:|---:|---:|---|---:|---:|---:|---:|",
    ]
    for c in COMPONENTS:
        lines.append(
            f"| {c} | {exact_source_us[c]:.1f} | {stock_source_us[c]:.1f} | "
            f"{_ratio(exact_source_us[c], stock_source_us[c]):.2f} | {est.bounds[c]} | "
            f"{est.factors[c]:.2f} | "
            f"{est.exact_us[c]:.1f} | {est.stock_us[c]:.1f} | {est.ratio[c]:.2f} |"
        )
    lines += [
        f"| **total** | {sum(exact_source_us.values()):.1f} | {sum(stock_source_us.values()):.1f} | "
        f"{_ratio(sum(exact_source_us.values()), sum(stock_source_us.values())):.2f} | | | "
        f"{sum(est.exact_us.values()):.1f} | {sum(est.stock_us.values()):.1f} | **{est.total_ratio:.2f}** |",
        "",
        f"With one factor for every component the total ratio would be {est.total_ratio_one_factor:.2f}.",
    ]
    return "\n".join(lines) + "\n"


# The recipe author's figures on the target card (t/s, single stream; nix/recipes/qwen3.8-27b-exact.json
# `reference`: u/stargate425 on r/LocalLLaMA, 2026-10-12), by prompt length.
AUTHOR_EXACT_TPS = {2200: 73.9, 131072: 42.6}
AUTHOR_VLLM_TPS = {2200: 67.4, 131072: 56.1}


def scaled_cycle_us(
    h200_us: Mapping[str, float],
    source: Card = H200,
    target: Card = RTX_PRO_6000_MAX_Q,
    bounds: Mapping[str, str] = BOUNDS,
) -> float:
    """One cycle's GPU time on `target` under the model, each component scaled by its factor (exact GEMMs
    keep the H200's own exact time: no stock run is needed, and the route is within a few % of cuBLAS)."""
    _check(h200_us, "cycle")
    return sum(h200_us[c] * factor(bounds[c], source, target) for c in COMPONENTS)


def rate_markdown(cycles_by_length: Mapping[int, Mapping[str, float]], tokens_per_cycle: float) -> str:
    """The model's decode rate on the target card at each profiled context, beside the author's figures
    where the author gave one (their acceptance is not known; ours is the stated, simulated one)."""
    lines = [
        f"**A model, not a measurement** ({H200.name} -> {RTX_PRO_6000_MAX_Q.name}; GPU kernel time per "
        f"cycle only, {tokens_per_cycle:g} tokens per cycle, the H200's exact GEMM time scaled).",
        "",
        "| context tokens | H200 us per cycle | target us per cycle (model) | target t/s (model) "
        "| author exact t/s | author vLLM t/s |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for length, us in sorted(cycles_by_length.items()):
        target = scaled_cycle_us(us)
        author = AUTHOR_EXACT_TPS.get(length)
        vllm = AUTHOR_VLLM_TPS.get(length)
        lines.append(
            f"| {length} | {sum(us[c] for c in COMPONENTS):.1f} | {target:.1f} | "
            f"{1e6 * tokens_per_cycle / target:.1f} | {'-' if author is None else author} | "
            f"{'-' if vllm is None else vllm} |"
        )
    return "\n".join(lines) + "\n"
