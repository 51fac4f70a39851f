"""Ranking candidates (specbench/analysis/ranking.py) and the TP range of a profile's overheads
(specbench/analysis/tp_range.py): the Pareto front on points, ranges and scenarios; SLO status over a
range; the order on synthetic figures; the range a prediction spans and its ends against the serving
model itself; a fitted beta recovered and ranking like the truth."""

from __future__ import annotations

import math

import pytest

from specbench.analysis import candidates as cand
from specbench.analysis import provenance
from specbench.analysis import ranking as rk
from specbench.analysis import serving_model as sm
from specbench.analysis import tp_range as tr

DRAFT = cand.Speculation("draft", "Qwen/Qwen3-1.7B", 7)
ACCEPTANCE = {"structured": (0.9, "assumed"), "open-ended": (0.6, "assumed")}
WORKLOAD = sm.Workload(64, 600)


BASELINE = cand.Speculation()


def candidate(tp: int, spec: cand.Speculation = BASELINE, node: str = "trn2.48xlarge") -> cand.Candidate:
    dep = sm.Deployment(method=spec.method, draft=spec.draft, k=spec.k, tensor_parallel_size=tp, node_type=node)
    return cand.Candidate(dep, "nxdi-draft", 1024)


def measured(c: cand.Candidate, load: int, tpot: float, thr: float, ttft: float = 0.05) -> rk.Figures:
    return rk.Figures(c, load, rk.Range.point(tpot), rk.Range.point(ttft), rk.Range.point(thr), rk.MEASURED, "run r1")


def test_pareto_front_on_points():
    points = [(1.0, 5.0), (2.0, 3.0), (3.0, 4.0), (2.0, 3.0), (0.5, 10.0), (2.0, 5.0)]
    # (3, 4) is beaten by (2, 3) on both; (2, 5) by (1, 5) on cost at equal latency; equal points both stay.
    assert rk.pareto_front(points) == [True, True, False, True, True, False]
    assert rk.pareto_front([]) == [] and rk.pareto_front([(1.0, 1.0)]) == [True]
    # On points the range marks are the front.
    marks = rk.pareto_marks([(rk.Range.point(c), rk.Range.point(t)) for c, t in points])
    assert marks == ["yes" if on else "no" for on in rk.pareto_front(points)]


def test_pareto_marks_on_ranges():
    a = (rk.Range(1.0, 2.0), rk.Range(1.0, 2.0))
    b = (rk.Range(3.0, 4.0), rk.Range(3.0, 4.0))  # a's worst corner (2, 2) beats b's best (3, 3): off
    c = (rk.Range(1.5, 3.5), rk.Range(0.5, 5.0))  # a's best (1, 1) beats c's worst, a's worst does not beat c's best
    assert rk.pareto_marks([a, b]) == ["yes", "no"]
    assert rk.pareto_marks([a, b, c]) == ["maybe", "no", "maybe"]  # c's best (1.5, 0.5) beats a's worst (2, 2) too
    # Scenarios: a row on the front in every one is "yes", in some "maybe", in none "no".
    assert rk.scenario_marks([[True, False, True], [True, False, False]]) == ["yes", "no", "maybe"]


def test_slo_status_over_a_range():
    assert rk.slo_status(rk.Range(0.05, 0.08), 0.1) == rk.MEETS
    assert rk.slo_status(rk.Range(0.05, 0.1), 0.1) == rk.MEETS  # at the limit is within it
    assert rk.slo_status(rk.Range(0.08, 0.12), 0.1) == rk.MAY_BREAK
    assert rk.slo_status(rk.Range(0.1, 0.12), 0.1) == rk.MAY_BREAK
    assert rk.slo_status(rk.Range(0.11, 0.2), 0.1) == rk.BREAKS
    assert rk.slo_status(rk.Range(5.0, 9.0), None) == rk.MEETS
    f = rk.Figures(candidate(32), 4, rk.Range(0.08, 0.12), rk.Range(3.0, 4.0), rk.Range.point(10.0), rk.MEASURED, "x")
    assert rk.row_slo(f, rk.Slo(0.1, 2.0)) == (rk.BREAKS, "TTFT")
    assert rk.row_slo(f, rk.Slo(0.1, 5.0)) == (rk.MAY_BREAK, "TPOT")
    assert rk.row_slo(f, rk.Slo(0.15, 5.0)) == (rk.MEETS, "")
    assert rk.Slo(0.1, 2.0).describe() == "TPOT <= 100 ms, TTFT <= 2000 ms"


def test_ranking_order_and_marks_on_synthetic_figures():
    # Cost = price / 3600 / (tokens/s per node) x 1e6: a node of $36/h at 1000 tokens/s is $10 per million.
    cheap_slow = measured(candidate(4), 4, 0.090, 2000.0)  # $5.00, TPOT 90 ms
    dear_fast = measured(candidate(32), 4, 0.030, 500.0)  # $20.00, 30 ms
    worst = measured(candidate(16), 4, 0.095, 400.0)  # $25.00, 95 ms: dominated by both
    breaks = measured(candidate(64), 4, 0.150, 4000.0)  # $2.50, 150 ms: cheapest, breaks the TPOT SLO
    unpriced = measured(candidate(4, node="trn2.3xlarge"), 4, 0.080, 300.0)
    other_load = measured(candidate(32), 1, 0.030, 200.0)
    prices = {"trn2.48xlarge": rk.Price(36.0, "test price")}
    (one, four) = rk.rank([cheap_slow, dear_fast, worst, breaks, unpriced, other_load], prices, rk.Slo(0.1, 2.0))
    assert one.concurrency == 1 and [r.figures for r in one.rows] == [other_load]
    assert [r.figures for r in four.rows] == [breaks, cheap_slow, dear_fast, worst, unpriced]
    assert [r.rank for r in four.rows] == [1, 2, 3, 4, 5]
    assert [round(r.cost.lo, 6) if r.cost else None for r in four.rows] == [2.5, 5.0, 20.0, 25.0, None]
    assert [r.slo for r in four.rows] == ["breaks", "meets", "meets", "meets", "meets"]
    assert [r.pareto for r in four.rows] == ["yes", "yes", "yes", "no", "-"]
    assert four.rows[-1].price.source == "no price for trn2.3xlarge"
    assert four.cheapest_meeting().figures is cheap_slow  # type: ignore[union-attr]


def test_ranges_and_figures_refuse_nonsense():
    with pytest.raises(ValueError, match="expected finite lo <= hi"):
        rk.Range(2.0, 1.0)
    with pytest.raises(ValueError, match="expected finite lo <= hi"):
        rk.Range(math.nan, 1.0)
    with pytest.raises(ValueError, match="source must be predicted or measured"):
        rk.Figures(candidate(4), 1, rk.Range.point(0.1), rk.Range.point(0.1), rk.Range.point(1.0), "guessed", "x")
    with pytest.raises(ValueError, match="tokens/s must be > 0"):
        measured(candidate(4), 1, 0.1, 0.0)
    with pytest.raises(ValueError, match="tpot_s must be a number > 0"):
        rk.Slo(0.0, 1.0)
    assert rk.cost_range(rk.Price(None, "none"), rk.Range.point(10.0)) is None
    assert rk.cost_range(rk.Price(36.0, "p"), rk.Range(500.0, 1000.0)) == rk.Range(10.0, 20.0)


# --- the TP range ----------------------------------------------------------------------------------


def basis(scaling: tr.TPScaling, profile: sm.Profile | None = None) -> tr.Basis:
    return tr.Basis(profile or sm.writeup_profile(), scaling, provenance.writeup(), sm.WRITEUP_DEPLOYMENT, ACCEPTANCE, WORKLOAD)


def test_the_overheads_scale_over_the_beta_range():
    s = tr.TPScaling(32)
    assert (s.beta_lo, s.beta_hi) == (0.0, 1.0) and s.betas == (0.0, 1.0)
    assert s.factor(4, 1.0) == 0.125 and s.factor(4, 0.0) == 1.0 and s.factor(64, 1.0) == 2.0
    p = s.scaled(sm.Profile(overhead_s=0.04, draft_overhead_s=0.008), 4, 1.0)
    assert (p.overhead_s, p.draft_overhead_s) == (0.005, 0.001)
    assert s.describe(4) == "per-step overheads fitted at TP 32: at TP 4 x (TP/32)^beta, beta in [0, 1], i.e. x 0.125 to 1"
    assert s.describe(32) == "per-step overheads as fitted (TP 32)"
    # log2 p (a tree all-reduce) lies inside [0, 1]: from 32 to 4 ranks it is beta = ln(2/5) / ln(1/8).
    assert 0 < math.log(2 / 5) / math.log(1 / 8) < 1 and 0 < math.log(6 / 5) / math.log(2) < 1
    with pytest.raises(ValueError, match="beta_lo <= beta_hi"):
        tr.TPScaling(32, 1.0, 0.0)


def test_predicted_ranges_are_the_serving_model_at_the_ends():
    profile, scaling = sm.writeup_profile(), tr.TPScaling(32)
    (f,) = tr.predicted_figures(candidate(4), basis(scaling), [4])
    small = sm.predict(candidate(4).deployment, scaling.scaled(profile, 4, 1.0), 0.0, 4, WORKLOAD)  # beta 1: overhead / 8
    same = sm.predict(candidate(4).deployment, profile, 0.0, 4, WORKLOAD)  # beta 0: as fitted
    assert (f.tpot_s.lo, f.tpot_s.hi) == (small.tpot_s, same.tpot_s)
    assert (f.tokens_per_s_per_node.lo, f.tokens_per_s_per_node.hi) == (same.tokens_per_s_per_node, small.tokens_per_s_per_node)
    assert len(f.scenarios) == 5 and f.scenarios[0][0] == "beta=0" and f.scenarios[-1][0] == "beta=1"
    # Above the fitted TP the ends swap: beta 1 doubles the overhead at TP 64.
    (g,) = tr.predicted_figures(candidate(64), basis(scaling), [4])
    assert g.tpot_s.lo == sm.predict(candidate(64).deployment, profile, 0.0, 4, WORKLOAD).tpot_s
    assert g.tpot_s.hi == sm.predict(candidate(64).deployment, scaling.scaled(profile, 64, 1.0), 0.0, 4, WORKLOAD).tpot_s
    # At the fitted TP there is no range: the write-up's 45 ms baseline at 4 clients.
    (h,) = tr.predicted_figures(candidate(32), basis(scaling), [4])
    assert h.tpot_s.is_point and h.tpot_s.lo == pytest.approx(0.045, rel=1e-9)
    assert h.assumptions == () and "TP 32 at TP 4" not in " ".join(f.assumptions)
    assert f.assumptions == ("per-step overheads fitted at TP 32: at TP 4 x (TP/32)^beta, beta in [0, 1], i.e. x 0.125 to 1",)
    assert f.provenance == "serving model; profile: the write-up's figures (the default profile)"


def test_a_speculative_row_takes_the_slowest_class_and_the_mix():
    c = candidate(32, DRAFT)
    (f,) = tr.predicted_figures(c, basis(tr.TPScaling(32)), [4])
    fast = sm.predict(c.deployment, sm.writeup_profile(), 0.9, 4, WORKLOAD)
    slow = sm.predict(c.deployment, sm.writeup_profile(), 0.6, 4, WORKLOAD)
    assert f.tpot_s.lo == slow.tpot_s and slow.tpot_s > fast.tpot_s
    assert f.tokens_per_s_per_node.lo == pytest.approx(1 / (0.5 / fast.tokens_per_s_per_node + 0.5 / slow.tokens_per_s_per_node))
    assert tr.Basis(
        sm.writeup_profile(), tr.TPScaling(32), provenance.writeup(), None, ACCEPTANCE, shares={"structured": 3}
    ).class_shares() == {
        "structured": 1.0,
        "open-ended": 0.0,
    }
    (g,) = tr.predicted_figures(candidate(4, DRAFT, "trn2.3xlarge"), basis(tr.TPScaling(32)), [1])
    assert "profile fitted on trn2.48xlarge: per-step overheads taken as the same on trn2.3xlarge at equal TP" in g.assumptions
    assert "a load outside those the profile was measured at (extrapolated)" in g.assumptions  # the write-up measured 4 clients


def test_a_fitted_beta_ranks_like_the_truth():
    # A truth whose overhead grows as TP^0.7 (draft overhead likewise); profiles "fitted" at each TP give
    # the overheads back; beta fitted on them is 0.7, and the ranking predicted from the TP 32 profile with
    # that beta is the truth's, row for row (measured points from the truth itself).
    truth = {tp: sm.Profile(overhead_s=0.04 * (tp / 32) ** 0.7, draft_overhead_s=0.005 * (tp / 32) ** 0.7) for tp in (4, 16, 32, 64)}
    scaling = tr.fit_tp_exponent([(tp, p.overhead_s) for tp, p in truth.items()], 32)
    assert scaling.beta_lo == scaling.beta_hi == pytest.approx(0.7, abs=1e-12) and scaling.fitted_tp == 32
    assert scaling.source == "fitted on per-step overheads at TP 4, 16, 32, 64"
    space = [candidate(tp, spec) for tp in (4, 16, 32, 64) for spec in (cand.Speculation(), DRAFT)]
    predicted = [f for c in space for f in tr.predicted_figures(c, basis(scaling, truth[32]), [1, 4])]
    assert all(f.tpot_s.is_point for f in predicted)
    truth_rows = []
    for c in space:
        for load in (1, 4):
            classes = [(0.0, 1.0)] if not c.deployment.method else [(0.9, 0.5), (0.6, 0.5)]
            preds = [(sm.predict(c.deployment, truth[c.tp], a, load, WORKLOAD), w) for a, w in classes]
            thr = 1 / sum(w / p.tokens_per_s_per_node for p, w in preds)
            truth_rows.append(measured(c, load, max(p.tpot_s for p, _ in preds), thr, max(p.ttft_s for p, _ in preds)))
    prices, slo = {"trn2.48xlarge": rk.Price(14.56, "p")}, rk.Slo(0.05, 2.0)
    ours, theirs = rk.rank(predicted, prices, slo), rk.rank(truth_rows, prices, slo)
    for a, b in zip(ours, theirs, strict=True):
        assert [r.figures.candidate.name for r in a.rows] == [r.figures.candidate.name for r in b.rows]
        assert [r.pareto for r in a.rows] == [r.pareto for r in b.rows] and {r.pareto for r in a.rows} <= {"yes", "no"}
        assert [r.slo for r in a.rows] == [r.slo for r in b.rows]
        for x, y in zip(a.rows, b.rows, strict=True):
            assert x.cost.lo == pytest.approx(y.cost.lo, rel=1e-9)  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="needs overheads at two or more TPs"):
        tr.fit_tp_exponent([(32, 0.04), (32, 0.05)])
    with pytest.raises(ValueError, match="expected \\(TP >= 1, overhead > 0\\) pairs"):
        tr.fit_tp_exponent([(32, 0.04), (16, 0.0)])
