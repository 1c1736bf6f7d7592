"""lab/perf/target_estimate.py: the labelled model scaling H200 component times to the recipe's card."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.perf import target_estimate as te

REPO = Path(__file__).resolve().parents[2]

# Cards with round figures, so every expected number below is worked out by hand.
SOURCE = te.Card("source", sm_count=100, bandwidth_gbs=2000.0, source="test")
TARGET = te.Card("target", sm_count=200, bandwidth_gbs=1000.0, source="test")  # bandwidth x2 time, SMs x0.5
EXACT = {"gemm": 300.0, "gdn": 100.0, "attention": 50.0, "rest": 40.0}
STOCK = {"gemm": 100.0, "gdn": 80.0, "attention": 100.0, "rest": 20.0}


def test_each_component_scales_by_its_bound() -> None:
    est = te.estimate(EXACT, STOCK, route_over_cublas=None, source=SOURCE, target=TARGET)
    assert est.factors == {"gemm": 2.0, "gdn": 2.0, "attention": 2.0, "rest": 0.5}
    assert est.exact_us == {"gemm": 600.0, "gdn": 200.0, "attention": 100.0, "rest": 20.0}
    assert est.stock_us == {"gemm": 200.0, "gdn": 160.0, "attention": 200.0, "rest": 10.0}
    assert est.ratio == pytest.approx({"gemm": 3.0, "gdn": 1.25, "attention": 0.5, "rest": 2.0})
    assert est.total_ratio == pytest.approx(920.0 / 570.0)
    assert est.total_ratio_one_factor == pytest.approx(490.0 / 300.0)


def test_exact_gemms_take_the_small_m_route_on_the_target() -> None:
    est = te.estimate(EXACT, STOCK, route_over_cublas=1.05, source=SOURCE, target=TARGET)
    assert est.exact_us["gemm"] == pytest.approx(210.0)  # stock 100 x 2 x 1.05, not the H200's 300
    assert est.ratio["gemm"] == pytest.approx(1.05)
    assert est.ratio["gdn"] == pytest.approx(1.25)  # other components keep the H200 ratio
    assert est.total_ratio == pytest.approx((210.0 + 200.0 + 100.0 + 20.0) / 570.0)
    assert est.total_ratio_one_factor == pytest.approx((105.0 + 100.0 + 50.0 + 40.0) / 300.0)


def test_other_bounds_and_bad_input() -> None:
    est = te.estimate(
        EXACT,
        STOCK,
        route_over_cublas=None,
        source=SOURCE,
        target=TARGET,
        bounds=dict.fromkeys(te.COMPONENTS, "sm"),
    )
    assert est.total_ratio == pytest.approx(est.total_ratio_one_factor)  # one factor: no reweighting
    with pytest.raises(ValueError, match="no time for rest"):
        te.estimate({"gemm": 1.0, "gdn": 1.0, "attention": 1.0}, STOCK)
    with pytest.raises(ValueError, match="negative time for gdn"):
        te.estimate(dict(EXACT, gdn=-1.0), STOCK)
    with pytest.raises(ValueError, match="use 'bandwidth' or 'sm'"):
        te.factor("clock", SOURCE, TARGET)


def test_card_figures_are_the_cited_ones() -> None:
    kernels = (REPO / "docs" / "kernels.md").read_text()
    cards = (REPO / "docs" / "cards.md").read_text()
    assert "device-to-device copy 4255 GB/s" in kernels and te.H200.bandwidth_gbs == 4255.0
    assert "| h200 | 0x2335 | NVIDIA H200 | 141 | 9.0 | 132 |" in cards and te.H200.sm_count == 132
    assert "188 SMs" in cards and te.RTX_PRO_6000_MAX_Q.sm_count == 188
    assert te.RTX_PRO_6000_MAX_Q.bandwidth_gbs == 512 / 8 * 28  # 512-bit GDDR7 at 28 Gbps
    assert te.factor("bandwidth", te.H200, te.RTX_PRO_6000_MAX_Q) == pytest.approx(2.374, abs=1e-3)
    assert te.factor("sm", te.H200, te.RTX_PRO_6000_MAX_Q) == pytest.approx(0.702, abs=1e-3)


def test_markdown_labels_the_model() -> None:
    est = te.estimate(EXACT, STOCK, source=SOURCE, target=TARGET)
    text = te.markdown(est, EXACT, STOCK)
    assert text.startswith("**A model, not a measurement**")
    assert "| gemm | 300.0 | 100.0 | 3.00 | bandwidth | 2.00 | 200.0 | 200.0 | 1.00 |" in text
