"""Exact values of specbench/analysis/sweep.py, the first stage of its mutation run (issue 24,
scripts/mutation.toml): fits on synthetic points with known parameters, a crossover between two
known loads, ties decided by a known bootstrap seed, goodput, throughput and the Pareto front."""

from __future__ import annotations

import dataclasses
import re

import pytest

from specbench.analysis import stats, sweep, theory
from specbench.analysis.sweep import CONCURRENCY, RATE, Load, LoadPoint, Slo
from specbench.results.records import RequestRecord


def interval(point: float | None, low: float | None = None, high: float | None = None) -> stats.Interval:
    return stats.Interval(point, low, high)


def test_the_fit_recovers_known_costs_on_both_sides_of_the_grid():
    for a, c in ((0.7, 0.013), (0.9, 0.5), (0.6, 1.99), (0.8, 0.0)):
        measured = [(k, theory.expected_speedup(a, k, c)) for k in (1, 2, 4, 7)]
        assert sweep.fit_draft_cost(a, measured) == pytest.approx(c, abs=1e-7), (a, c)
    # k = 0 (a baseline) and unknown or infinite speedups are left out of the fit.
    exact = [(k, theory.expected_speedup(0.8, k, 0.3)) for k in (2, 5)]
    assert sweep.fit_draft_cost(0.8, [*exact, (0, 9.0), (3, None), (4, float("inf"))]) == pytest.approx(0.3, abs=1e-7)
    assert sweep.fit_draft_cost(0.8, [(0, 1.0), (3, float("nan"))]) is None
    # Beyond c_max the fit stops at c_max; a smaller c_max bounds it.
    far = [(k, theory.expected_speedup(0.8, k, 3.0)) for k in (1, 3)]
    assert sweep.fit_draft_cost(0.8, far) == pytest.approx(2.0, abs=1e-6)  # C_MAX: twice a target step
    assert sweep.fit_draft_cost(0.8, far, c_max=1.0) == pytest.approx(1.0, abs=1e-6)


def test_the_crossover_interpolates_between_two_known_loads():
    # 1.6x at 2 in flight, 0.8x at 6: the point estimate crosses 1 three quarters of the way, on log
    # load (two levels are a geometric series): 2 x 3^0.75 = 4.559 (on linear load it would be 5).
    c = sweep.crossover(CONCURRENCY, [(6, interval(0.8, 0.7, 0.9)), (2, interval(1.6, 1.5, 1.7))])
    assert (c.kind, c.last_paying, c.first_not_paying, c.interpolated) == (CONCURRENCY, 2, 6, pytest.approx(2 * 3**0.75))
    assert c.scale == sweep.LOG
    assert c.text == "pays up to 2 in flight, not at 6 (point estimate crosses 1 at ~4.56, interpolated on log load)"
    # A point estimate exactly at 1 is where it crosses: the next load itself.
    c = sweep.crossover(RATE, [(1, interval(1.5, 1.2, 1.8)), (3, interval(1.0, 0.9, 1.1))])
    assert (c.last_paying, c.first_not_paying, c.interpolated) == (1, 3, pytest.approx(3.0))
    assert c.text == "pays up to 1 requests/s, not at 3 (point estimate crosses 1 at ~3, interpolated on log load)"
    # A CI reaching 1 with a point above it: not paying, and no crossing of the point estimate.
    c = sweep.crossover(RATE, [(1, interval(1.5, 1.2, 1.8)), (2, interval(1.1, 0.95, 1.3))])
    assert (c.last_paying, c.first_not_paying, c.interpolated) == (1, 2, None)
    assert c.text == "pays up to 1 requests/s, not at 2"
    # Without a CI, the point decides; a missing interval does not pay.
    c = sweep.crossover(CONCURRENCY, [(1, interval(1.2)), (2, None)])
    assert (c.last_paying, c.first_not_paying, c.interpolated) == (1, 2, None)
    assert sweep.crossover(CONCURRENCY, []) == sweep.Crossover(CONCURRENCY, None, None, None, "no measured load")
    assert sweep.crossover(RATE, [(2.5, interval(1.3, 1.1, 1.5))]).text == "pays at every measured load (up to 2.5 requests/s)"


def test_pays_needs_the_whole_ci_above_one():
    assert sweep.pays(interval(1.2, 1.01, 1.4)) and not sweep.pays(interval(1.2, 1.0, 1.4))
    assert sweep.pays(interval(1.01)) and not sweep.pays(interval(1.0)) and not sweep.pays(interval(None)) and not sweep.pays(None)


def test_ties_are_decided_by_the_bootstrap_of_the_difference():
    base, best, other = [10.0, 11.0, 12.0, 13.0], [5.0, 5.5, 6.0, 6.5], [5.2, 5.6, 6.1, 6.6]
    difference = sweep.speedup_difference()
    # median(base) / median(best) - median(base) / median(other) = 11.5 / 5.75 - 11.5 / 5.85
    assert difference(base, best, other) == pytest.approx(11.5 / 5.75 - 11.5 / 5.85)
    assert difference(base, [0.0, 0.0], other) is None and difference(base, best, [0.0]) is None
    assert sweep.speedup_difference(lambda values: sum(values) / len(values))([1.0, 3.0], [1.0], [2.0]) == pytest.approx(2.0 - 1.0)
    assert sweep.indistinguishable(interval(0.1, -0.2, 0.3)) and sweep.indistinguishable(interval(0.1, 0.0, 0.3))
    assert sweep.indistinguishable(interval(-0.1, -0.3, 0.0)) and sweep.indistinguishable(interval(None))
    assert not sweep.indistinguishable(interval(0.2, 0.01, 0.3)) and not sweep.indistinguishable(interval(-0.2, -0.3, -0.01))


def test_goodput_at_the_limits():
    def record(ttft: float | None, tpot: float | None, error: int | None = None) -> RequestRecord:
        r = RequestRecord("r", "v", "t", "c", "native", 0, 0.0, error_code=error)
        r.ttft_s, r.time_per_output_token_s = ttft, tpot
        return r

    exact = [record(0.2, 0.015), record(0.2001, 0.01), record(0.1, 0.0151), record(None, 0.01), record(0.1, None)]
    assert sweep.goodput(exact, Slo(ttft_ms=200, tpot_ms=15)) == pytest.approx(1 / 5)  # the limits themselves are within
    assert sweep.goodput(exact, Slo(ttft_ms=200)) == pytest.approx(3 / 5)
    assert sweep.goodput(exact, Slo(tpot_ms=15)) == pytest.approx(3 / 5)
    assert sweep.goodput([], Slo(ttft_ms=200)) is None


def test_node_throughput_and_the_pareto_front_exactly():
    def record(case: str, start: float, e2e: float | None, tokens: int, error: int | None = None) -> RequestRecord:
        r = RequestRecord("r", "v", case, "c", "native", 0, start, error_code=error)
        r.end_to_end_latency_s, r.output_tokens = e2e, tokens
        return r

    # Busy is the union of every request window, failed ones too (analysis/cost.py: the server was
    # occupied): [0, 5] (a's overlapping requests) and [9, 19] (the failed b), 15 s for the 400 tokens
    # of the successful requests; a request without an end has no window.
    records = [record("a", 0, 3, 100), record("a", 2, 3, 200), record("b", 10, 2, 100), record("b", 11, None, 50)]
    records += [record("b", 9, 10, 1000, error=500), record("a", 1, 1, 0)]
    assert sweep.node_throughput(records) == pytest.approx(400 / 15)
    assert sweep.node_throughput(records, servers_per_node=3) == pytest.approx(3 * 400 / 15)
    assert sweep.node_throughput([record("a", 0, 0, 10)]) is None
    assert sweep.node_throughput([]) is None

    def lp(name: str, user: float | None, node: float | None) -> LoadPoint:
        return LoadPoint(name, Load(CONCURRENCY, 1), 1, 0, user, node, stats.Distribution(0), stats.Distribution(0), None, None)

    points = [lp("a", 100, 100), lp("tie", 100, 100), lp("b", 50, 300), lp("c", 100, 90), lp("d", 50, 299), lp("x", None, 500)]
    assert [p.variant for p in sweep.pareto_front(points)] == ["a", "tie", "b"]


def test_load_and_variant_labels():
    assert [Load(CONCURRENCY, 4).label, Load(RATE, 0.5).label, Load(RATE, 12).label] == ["c4", "r0p5", "r12"]
    assert Load(CONCURRENCY, 4).describe() == "4 in flight" and Load(RATE, 2.5).describe() == "2.5 requests/s (Poisson)"
    assert Load.parse("r0p5") == Load(RATE, 0.5)
    for bad in ("", "c", "cx", "r-1", "q3"):
        message = f"load level {bad!r}: expected c<concurrency> or r<requests per second>, e.g. c4 or r2p5"
        with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
            Load.parse(bad)
    assert sweep.Variant("baseline").is_baseline and sweep.Variant("b", k=0).is_baseline and not sweep.Variant("s", "d", 3).is_baseline
    assert sweep.Variant("baseline").describe() == "baseline (no speculation)"
    assert sweep.Variant("s", "Qwen3-1.7B", 3).describe() == "Qwen3-1.7B, k = 3" and sweep.Variant("s", None, 3).describe() == "s, k = 3"


def test_the_sweep_contracts_spell_the_load_kinds_and_metrics_so():
    """run.json's ``sweep.load.kind`` (specbench run --sweep-point, charts/sweep.py) is "concurrency" or
    "rate"; the report titles its metric in words."""
    assert (sweep.CONCURRENCY, sweep.RATE) == ("concurrency", "rate")
    assert Load("concurrency", 4).label == "c4" and Load("rate", 2.5).describe() == "2.5 requests/s (Poisson)"
    assert sweep.METRIC_TITLES == {
        "time_per_output_token_s": "time per output token",
        "end_to_end_latency_s": "end-to-end latency",
        "ttft_s": "time to first token",
    }


def test_the_inputs_are_immutable_values_with_empty_defaults():
    load, variant = Load(CONCURRENCY, 1), sweep.Variant("baseline")
    assert variant == sweep.Variant("baseline", None, None, None)
    point = sweep.Point("p", variant, load, 0, ())
    assert (point.acceptance, point.source) == ({}, "")
    assert sweep.Slo() == sweep.Slo(None, None)
    for value, name in ((load, "value"), (variant, "k"), (point, "wave"), (sweep.Slo(), "ttft_ms")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(value, name, 2)
    assert len({load, Load(CONCURRENCY, 1.0), variant, sweep.Variant("baseline")}) == 2  # hashable: used as keys


def test_the_recommendation_text_word_for_word():
    load, variant = Load(CONCURRENCY, 4), sweep.Variant("q-k9", "Qwen3-1.7B", 9)
    text = sweep.recommendation_text("structured", load, variant, interval(3.104, 2.9, 3.3), ["k = 7", "Qwen3-0.6B, k = 5"])
    assert text == "structured prompts at 4 in flight: Qwen3-1.7B, k = 9, 3.10x [2.90-3.30] (indistinguishable: k = 7, Qwen3-0.6B, k = 5)"
    assert sweep.recommendation_text("qa", Load(RATE, 2.5), variant, interval(1.5), []) == (
        "qa prompts at 2.5 requests/s (Poisson): Qwen3-1.7B, k = 9, 1.50x"
    )
    assert sweep.recommendation_text("qa", load, variant, interval(None), []) == "qa prompts at 4 in flight: Qwen3-1.7B, k = 9"
    assert sweep.recommendation_text("qa", load, None, interval(2.0, 1.5, 2.5), ["x"]) == (
        "qa prompts at 4 in flight: no speculation (no variant is faster than the baseline)"
    )


def test_the_outputs_are_immutable_values():
    outputs = (
        sweep.CurvePoint,
        sweep.DraftCurve,
        sweep.Recommendation,
        sweep.LoadPoint,
        sweep.Crossover,
        sweep.Drift,
        sweep.ClassAnalysis,
        sweep.SweepAnalysis,
    )
    assert [cls.__name__ for cls in outputs if not cls.__dataclass_params__.frozen] == []  # type: ignore[attr-defined]
    curve = sweep.DraftCurve("Qwen3-1.7B", 0.8, 0.1, [], None)
    assert curve.a_source == ""  # no acceptance source named unless one was used
    with pytest.raises(dataclasses.FrozenInstanceError):
        curve.c = 0.2  # type: ignore[misc]


def test_more_crossover_and_front_edges():
    # The first load already does not pay: said so, with the load as format(g) prints it.
    c = sweep.crossover(RATE, [(0.5, interval(1.1, 0.95, 1.3)), (2, interval(1.5, 1.2, 1.8))])
    assert (c.last_paying, c.first_not_paying, c.text) == (None, 0.5, "does not pay at the lowest measured load (0.5 requests/s)")
    # Interpolated from the load just before, whatever the loads after it hold.
    c = sweep.crossover(CONCURRENCY, [(1, interval(1.5, 1.2, 1.8)), (2, interval(0.5, 0.4, 0.6)), (3, None)])
    assert (c.last_paying, c.first_not_paying, c.interpolated) == (1, 2, pytest.approx(1.5))

    def lp(name: str, user: float, node: float) -> LoadPoint:
        return LoadPoint(name, Load(CONCURRENCY, 1), 1, 0, user, node, stats.Distribution(0), stats.Distribution(0), None, None)

    # Equal on one axis and behind on the other is dominated, on either axis.
    points = [lp("b", 50, 300), lp("same-node", 40, 300), lp("a", 100, 100), lp("same-user", 100, 80)]
    assert [p.variant for p in sweep.pareto_front(points)] == ["a", "b"]


def test_goodput_counts_a_failed_request_out_and_short_busy_times_count():
    ok = RequestRecord("r", "v", "t", "c", "native", 0, 0.0)
    ok.ttft_s, ok.time_per_output_token_s = 0.1, 0.01
    failed = RequestRecord("r", "v", "t", "c", "native", 1, 0.0, error_code=500)
    failed.ttft_s, failed.time_per_output_token_s = 0.1, 0.01  # timings of a request that still failed
    assert sweep.goodput([ok, failed], Slo(ttft_ms=200, tpot_ms=15)) == 0.5
    short = RequestRecord("r", "v", "a", "c", "native", 0, 10.0)
    short.end_to_end_latency_s, short.output_tokens = 0.5, 40
    assert sweep.node_throughput([short]) == pytest.approx(80.0)  # busy half a second: 40 / 0.5


def test_analyze_sweep_defaults():
    truth_points = []
    for name, variant, scale in (("b", sweep.Variant("baseline"), 1.0), ("s", sweep.Variant("s-k3", "D", 3), 0.5)):
        records = []
        for index in range(4):
            r = RequestRecord(name, variant.name, "case", "qa", "native", index, 100.0 + index)
            r.ttft_s, r.time_per_output_token_s = 0.05, 0.02 * scale * (1 + index / 100)
            r.end_to_end_latency_s = r.ttft_s + 99 * r.time_per_output_token_s
            r.output_tokens, r.output_throughput_tps = 100, 100 / r.end_to_end_latency_s
            records.append(r)
        truth_points.append(sweep.Point(name, variant, Load(CONCURRENCY, 1), 0, tuple(records), {} if name == "b" else {"qa": 0.99}))
    analysis = sweep.analyze_sweep(truth_points)
    assert (analysis.sweep_id, analysis.metric, analysis.resamples, analysis.confidence, analysis.servers_per_node) == (
        "",
        sweep.E2E,
        2000,
        0.95,
        1,
    )
    assert analysis.classes[0].load_points[0].goodput is None  # no SLO by default
    # a = 0.99 and a cheap draft: the model's optimum is past 15, so k_max = 15 caps it.
    assert analysis.classes[0].curves["c1"][0].model_optimum[0] == 15  # type: ignore[index]


def _records(name: str, variant: str, tpots: list[float], prompt_class: str = "qa", start: float = 100.0) -> tuple[RequestRecord, ...]:
    out = []
    for index, tpot in enumerate(tpots):
        r = RequestRecord(name, variant, "case", prompt_class, "native", index, start + index)
        r.ttft_s, r.time_per_output_token_s = 0.05, tpot
        r.end_to_end_latency_s = r.ttft_s + 99 * tpot
        r.output_tokens, r.output_throughput_tps = 100, 100 / r.end_to_end_latency_s
        out.append(r)
    return tuple(out)


def test_points_from_runs_with_nothing_but_records_take_the_defaults():
    (point,) = sweep.points_from_run({"sweep": {"variant": {"name": "v", "k": 2}}}, [], {})
    assert (point.point_id, point.wave, point.load, point.source) == ("", 0, Load(CONCURRENCY, 1.0), "")
    record = RequestRecord("run", "sd", "json", "qa", "native", 0, 0.0)
    run = {"plan": {"deployment": {"variants": [{"name": "sd", "draft_model": "D", "num_speculative_tokens": 3, "method": "eagle3"}]}}}
    (point,) = sweep.points_from_run(
        run, [record], {"json@c1": {"sd": {"per_position": [0.5]}}, "json@c2": {"sd": {"per_position": [0.9]}}}
    )
    assert (point.point_id, point.wave, point.load) == ("sd-c1", 0, Load(CONCURRENCY, 1.0))  # no load in the plan: one in flight
    assert point.variant == sweep.Variant("sd", "D", 3, "eagle3") and dict(point.acceptance) == {"qa": 0.5}
    assert sweep.load_of_record(record, Load(RATE, 3)) == Load(RATE, 3)
    two = {"json@c1": {"sd": {"per_position": [0.6]}}, "yaml@c1": {"sd": {"per_position": [0.8]}}}
    (mean,) = sweep.points_from_run(
        {"plan": {**run["plan"], "suite": {"test_cases": [{"name": "yaml", "prompt_class": "qa"}]}}}, [record], two
    )
    assert dict(mean.acceptance) == {"qa": pytest.approx(0.7)}  # the mean over the class's test cases


def test_drift_names_the_first_and_last_wave_and_flags_only_clear_changes():
    base, load, other = sweep.Variant("baseline"), Load(CONCURRENCY, 1), Load(CONCURRENCY, 4)
    spec = sweep.Variant("s-k3", "D", 3)
    tpots = [0.020, 0.0201, 0.0199, 0.0202, 0.0198, 0.020]
    points = [
        sweep.Point("b0", base, load, 0, _records("b0", "baseline", tpots)),
        sweep.Point("b1", base, load, 1, _records("b1", "baseline", [t * 1.5 for t in tpots])),
        sweep.Point("b2", base, load, 2, _records("b2", "baseline", [t * 1.2 for t in tpots])),
        sweep.Point("o5", base, other, 5, _records("o5", "baseline", tpots)),
        sweep.Point("s", spec, load, 1, _records("s", "s-k3", [t / 2 for t in tpots]), {"qa": 0.8}),
    ]
    analysis = sweep.analyze_sweep(points, metric=sweep.TPOT, resamples=200)
    (drift,) = analysis.classes[0].drift  # the other load has one wave: nothing to compare
    assert (drift.load, drift.first_wave, drift.last_wave) == (load, 0, 2)
    assert drift.ratio.point == pytest.approx(1.2, rel=1e-6)  # last / first wave's median TPOT
    assert drift.text.startswith("qa, 1 in flight: baseline TPOT wave 0 / wave 2 = ") and drift.text.endswith(" - DRIFT: the waves differ")
    assert analysis.notes == [drift.text]
    # Within the tolerance: reported, not flagged.
    calm = sweep.analyze_sweep(points, metric=sweep.TPOT, resamples=200, drift_tolerance=0.5)
    assert not calm.classes[0].drift[0].text.endswith("DRIFT: the waves differ") and calm.notes == []


def test_recommendations_name_ties_by_k_for_the_same_draft_and_by_draft_otherwise():
    base, load = sweep.Variant("baseline"), Load(CONCURRENCY, 1)
    tpots = [0.020 * (1 + i / 50) for i in range(8)]
    variants = [sweep.Variant("d-k3", "D", 3), sweep.Variant("d-k5", "D", 5), sweep.Variant("e-k2", "E", 2)]
    points = [sweep.Point("b", base, load, 0, _records("b", "baseline", tpots))]
    for variant, speedup in zip(variants, (2.0, 1.99, 1.98), strict=True):
        points.append(sweep.Point(variant.name, variant, load, 1, _records(variant.name, variant.name, [t / speedup for t in tpots]), {}))
    rec = sweep.analyze_sweep(points, metric=sweep.TPOT, resamples=200).classes[0].recommendations["c1"]
    assert (rec.variant, rec.draft_model, rec.k, rec.metric) == ("d-k3", "D", 3, sweep.TPOT)
    assert rec.indistinguishable == ["d-k5", "e-k2"]
    assert rec.text.endswith(" (indistinguishable: k = 5, E, k = 2)")
    # Nothing faster than the baseline (1.0x exactly is not faster): the baseline, at 1.0x.
    slow = [points[0], sweep.Point("x", variants[0], load, 1, _records("x", "d-k3", tpots), {})]
    rec = sweep.analyze_sweep(slow, metric=sweep.TPOT, resamples=200).classes[0].recommendations["c1"]
    assert (rec.variant, rec.speedup.point, rec.indistinguishable) == (sweep.BASELINE, 1.0, [])
    assert sweep.analyze_sweep([slow[1]], resamples=50).notes == ["no baseline point: no speedup can be computed"]


def test_apart_needs_both_intervals_and_a_gap():
    assert sweep._apart(interval(2.0, 1.8, 2.2), interval(1.5, 1.3, 1.7))
    assert not sweep._apart(interval(2.0, 1.8, 2.2), interval(1.7, 1.5, 1.8))  # touching: not apart
    assert not sweep._apart(interval(2.0), interval(1.5, 1.3, 1.7)) and not sweep._apart(interval(2.0, 1.8, 2.2), interval(1.5))


def test_a_load_point_averages_node_throughput_over_its_points():
    load = Load(CONCURRENCY, 1)
    first = _records("a", "v", [0.01] * 2)  # two requests 1 s apart, 1.04 s each: 200 tokens over 2.04 s
    second = _records("b", "v", [0.02] * 2, start=500.0)
    point = sweep._load_point("v", load, [first, second], Slo(), 1, None)
    expected = [sweep.node_throughput(list(first)), sweep.node_throughput(list(second))]
    assert point.tokens_per_s_per_node == pytest.approx(sum(expected) / 2)  # type: ignore[arg-type]
    assert point.tokens_per_s_per_user == pytest.approx(100 / (0.05 + 99 * 0.015), rel=0.2)
    assert (point.requests, point.errors) == (4, 0)
