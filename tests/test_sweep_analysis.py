"""specbench.analysis.sweep: curves, the fitted draft cost, recommendations, crossover, goodput, drift."""

from __future__ import annotations

import math

import pytest

from specbench.analysis import stats, sweep, theory
from specbench.analysis.sweep import CONCURRENCY, RATE, Load, LoadPoint, Slo
from specbench.results.records import RequestRecord
from tests.sweep_data import Truth, bench_truth, synthetic_points

BASELINE_NAME = sweep.BASELINE

TRUTH = Truth(
    classes={"structured": 0.9, "open-ended": 0.6},
    drafts={"Qwen3-1.7B": 0.15},
    ks=(1, 2, 3, 5, 8, 11),
    loads=(Load(CONCURRENCY, 1), Load(CONCURRENCY, 8), Load(RATE, 2.5)),
    baseline_slowdown=0.0,
    speculative_slowdown=0.1,
    noise=0.01,
)


@pytest.fixture(scope="module")
def analysis() -> sweep.SweepAnalysis:
    return sweep.analyze_sweep(synthetic_points(TRUTH, requests=12), sweep_id="s1", metric=sweep.TPOT, resamples=300, slo=Slo(200, 10))


def test_load_labels_round_trip_and_bad_labels_are_named() -> None:
    assert Load(RATE, 2.5).label == "r2p5" and Load(CONCURRENCY, 4).label == "c4"
    assert Load.parse("r2p5") == Load(RATE, 2.5) and Load.parse("c16") == Load(CONCURRENCY, 16)
    with pytest.raises(ValueError, match=r"load level 'x4': expected c<concurrency> or r<requests per second>"):
        Load.parse("x4")
    with pytest.raises(ValueError, match="load level 'c0'"):
        Load.parse("c0")


def test_fit_recovers_the_draft_cost_from_exact_speedups() -> None:
    measured = [(k, theory.expected_speedup(0.8, k, 0.12)) for k in (1, 3, 5, 9)]
    assert sweep.fit_draft_cost(0.8, measured) == pytest.approx(0.12, abs=1e-6)
    assert sweep.fit_draft_cost(0.8, []) is None
    # A speedup above what any c allows pins c at 0, never negative.
    assert sweep.fit_draft_cost(0.5, [(3, 5.0)]) == pytest.approx(0.0, abs=1e-9)


def test_each_class_recovers_its_known_optimum(analysis: sweep.SweepAnalysis) -> None:
    truth = {name: theory.best_k(a, 0.15)[0] for name, a in TRUTH.classes.items()}
    assert truth == {"structured": 8, "open-ended": 2}  # the optima differ by class
    for cls in analysis.classes:
        curve = cls.curves["c1"][0]
        assert curve.a == pytest.approx(TRUTH.classes[cls.prompt_class])
        assert curve.c == pytest.approx(0.15, abs=0.01)
        assert curve.model_optimum is not None and curve.model_optimum[0] == truth[cls.prompt_class]
        rec = cls.recommendations["c1"]
        recommended = {rec.variant, *rec.indistinguishable}
        assert f"qwen3-1-7b-k{truth[cls.prompt_class]}" in recommended
        assert rec.k in (truth[cls.prompt_class], *[int(v.rsplit("k", 1)[1]) for v in rec.indistinguishable])


def test_the_table_heads_with_one_line_a_class_and_load(analysis: sweep.SweepAnalysis) -> None:
    assert len(analysis.table) == 2 * 3
    line = analysis.table[3]  # classes in name order: open-ended, then structured
    assert line.startswith("structured prompts at 1 in flight: Qwen3-1.7B, k = ")
    rec = analysis.classes[1].recommendations["c1"]
    assert rec.k == 8 and rec.indistinguishable == []
    curve = analysis.classes[1].curves["c1"][0]
    predicted = theory.expected_speedup(0.9, 8, curve.c)  # type: ignore[arg-type]
    assert line == (
        f"structured prompts at 1 in flight: Qwen3-1.7B, k = 8, {rec.speedup.point:.2f}x [{rec.speedup.low:.2f}-{rec.speedup.high:.2f}]"
        f"; model optimum k = 8 ({predicted:.2f}x)"
    )
    assert analysis.table[0].startswith("open-ended prompts at 1 in flight: Qwen3-1.7B, k = 2, ")


def test_speculation_stops_paying_at_the_known_load(analysis: sweep.SweepAnalysis) -> None:
    # Open-ended at k = 2: 1.508x at no load; the speculative step slows 10 % per request in flight,
    # so at 8 in flight 1.508 / 1.8 = 0.84x: it paid at 1, not at 8; the estimate crosses 1 between.
    openended = next(c for c in analysis.classes if c.prompt_class == "open-ended")
    by_kind = {c.kind: c for c in openended.crossovers}
    crossing = by_kind[CONCURRENCY]
    assert (crossing.last_paying, crossing.first_not_paying) == (1.0, 8.0)
    assert crossing.interpolated is not None and 1.0 < crossing.interpolated < 8.0
    assert crossing.text.startswith("pays up to 1 in flight, not at 8")


def test_crossover_rules() -> None:
    def i(point: float, low: float, high: float) -> stats.Interval:
        return stats.Interval(point, low, high)

    assert (
        sweep.crossover(CONCURRENCY, [(4, i(1.5, 1.4, 1.6)), (1, i(2.0, 1.9, 2.1))]).text
        == "pays at every measured load (up to 4 in flight)"
    )
    c = sweep.crossover(CONCURRENCY, [(1, i(2.0, 1.9, 2.1)), (2, i(1.5, 1.4, 1.6)), (4, i(0.5, 0.4, 0.6))])
    # Doubling levels: halfway between 2 and 4 on log load is 2 x sqrt(2), not 3.
    assert (c.last_paying, c.first_not_paying, c.interpolated, c.scale) == (2, 4, pytest.approx(2 * math.sqrt(2)), "log")
    assert c.text == "pays up to 2 in flight, not at 4 (point estimate crosses 1 at ~2.83, interpolated on log load)"
    c = sweep.crossover(CONCURRENCY, [(1, i(2.0, 1.9, 2.1)), (2, i(1.5, 1.4, 1.6)), (3, i(0.5, 0.4, 0.6))])
    assert (c.interpolated, c.scale) == (pytest.approx(2.5), "linear")  # evenly spaced levels: a straight line
    # A CI that reaches 1 does not pay, even with a point above 1.
    c = sweep.crossover(RATE, [(1, i(1.2, 0.9, 1.5))])
    assert (c.last_paying, c.first_not_paying) == (None, 1)
    assert c.text == "does not pay at the lowest measured load (1 requests/s)"


def test_crossover_on_a_known_convex_curve() -> None:
    """s(L) = 1.5 - 0.2 log2 L is convex in L and crosses 1 at L = 2^2.5 = 5.66. Measured at doubling
    levels, a straight line between 4 (1.1x) and 8 (0.9x) says 6.0 (6 % high); log load finds it."""

    def s(load: float) -> stats.Interval:
        value = 1.5 - 0.2 * math.log2(load)
        return stats.Interval(value, value - 0.01, value + 0.01)

    levels = [1, 2, 4, 8, 16]
    c = sweep.crossover(CONCURRENCY, [(load, s(load)) for load in levels])
    assert (c.last_paying, c.first_not_paying, c.scale) == (4, 8, "log")
    assert c.interpolated == pytest.approx(2**2.5, rel=1e-9)
    assert sweep.interpolate_crossing((4, s(4).point), (8, s(8).point), "linear") == pytest.approx(6.0)
    assert sweep.interpolation_scale([1, 2, 4, 8]) == "log" and sweep.interpolation_scale([1, 4, 16]) == "log"
    assert sweep.interpolation_scale([1, 2, 3, 4]) == "linear" and sweep.interpolation_scale([1, 2, 8]) == "linear"
    assert sweep.interpolation_scale([4]) == "linear"


def test_goodput_counts_failures_as_missed() -> None:
    def record(ttft: float | None, tpot: float | None, error: int | None = None) -> RequestRecord:
        r = RequestRecord("r", "v", "t", "c", "native", 0, 0.0, error_code=error)
        r.ttft_s, r.time_per_output_token_s = ttft, tpot
        return r

    records = [record(0.1, 0.010), record(0.3, 0.010), record(0.1, 0.020), record(None, None, 500)]
    assert sweep.goodput(records, Slo(ttft_ms=200, tpot_ms=15)) == 0.25
    assert sweep.goodput(records, Slo(ttft_ms=200)) == 0.5
    assert sweep.goodput(records, Slo()) is None


def test_pareto_front_drops_dominated_points() -> None:
    def lp(name: str, user: float, node: float) -> LoadPoint:
        return LoadPoint(name, Load(CONCURRENCY, 1), 1, 0, user, node, stats.Distribution(0), stats.Distribution(0), None, None)

    points = [lp("a", 100, 100), lp("b", 50, 300), lp("c", 40, 200), lp("d", 100, 90), lp("e", 20, 300)]
    assert [p.variant for p in sweep.pareto_front(points)] == ["a", "b"]


def test_node_throughput_sums_tokens_over_busy_time() -> None:
    def record(case: str, start: float, e2e: float, tokens: int) -> RequestRecord:
        r = RequestRecord("r", "v", case, "c", "native", 0, start)
        r.end_to_end_latency_s, r.output_tokens = e2e, tokens
        return r

    records = [record("a", 0, 2, 100), record("a", 1, 2, 100), record("b", 10, 1, 100)]
    assert sweep.node_throughput(records) == pytest.approx(300 / (3 + 1))
    assert sweep.node_throughput(records, servers_per_node=2) == pytest.approx(150.0)


def test_baseline_drift_between_first_and_last_wave() -> None:
    points = synthetic_points(TRUTH, requests=10)
    # The last wave's baseline 20 % slower: every TPOT x 1.2.
    slowed = []
    for p in points:
        if p.variant.is_baseline and p.wave == 1:
            for r in p.records:
                r.time_per_output_token_s *= 1.2
        slowed.append(p)
    result = sweep.analyze_sweep(slowed, metric=sweep.TPOT, resamples=200)
    drift = result.classes[0].drift[0]
    assert (drift.first_wave, drift.last_wave) == (0, 1)
    assert drift.ratio.point == pytest.approx(1.2, rel=0.03)
    assert "DRIFT" in drift.text and drift.text in result.notes


def test_no_speculation_when_nothing_is_faster() -> None:
    truth = Truth(classes={"open-ended": 0.1}, drafts={"slow": 0.6}, ks=(3, 5), loads=(Load(CONCURRENCY, 1),))
    result = sweep.analyze_sweep(synthetic_points(truth), resamples=100)
    rec = result.classes[0].recommendations["c1"]
    assert rec.variant == sweep.BASELINE
    assert result.table == ["open-ended prompts at 1 in flight: no speculation (no variant is faster than the baseline)"]


def test_bad_metric_is_named() -> None:
    with pytest.raises(ValueError, match="metric 'x': allowed time_per_output_token_s, end_to_end_latency_s, ttft_s"):
        sweep.analyze_sweep([], metric="x")


def test_points_from_a_sweep_run() -> None:
    run = {
        "sweep": {
            "sweep_id": "s1",
            "point_id": "qwen3-1-7b-k5-r2",
            "wave": 1,
            "variant": {"name": "qwen3-1-7b-k5", "draft_model": "Qwen/Qwen3-1.7B", "k": 5, "method": "draft_model"},
            "load": {"kind": "rate", "value": 2},
        },
        "plan": {"suite": {"test_cases": [{"name": "json", "prompt_class": "structured"}, {"name": "poem", "prompt_class": "open-ended"}]}},
    }
    acceptance = {"json": {"sd": {"per_position": [0.8, 0.7]}}, "poem": {"sd": {"source": "missing"}}}
    (point,) = sweep.points_from_run(run, [], acceptance, "s3://b/p")
    assert point.point_id == "qwen3-1-7b-k5-r2" and point.wave == 1 and point.load == Load(RATE, 2.0)
    assert point.variant == sweep.Variant("qwen3-1-7b-k5", "Qwen/Qwen3-1.7B", 5, "draft_model")
    assert dict(point.acceptance) == {"structured": 0.8}


def test_points_from_a_multi_level_service_run() -> None:
    run = {
        "plan": {
            "load": {"concurrency": 4},
            "deployment": {
                "variants": [{"name": "qwen-vllm"}, {"name": "qwen-sd-vllm", "draft_model": "Qwen/Qwen3-0.6B", "num_speculative_tokens": 7}]
            },
        }
    }
    records = []
    for variant in ("qwen-vllm", "qwen-sd-vllm"):
        for level in ("c1", "r2"):
            record = RequestRecord("run", variant, "json", "structured", "native", 0, 0.0)
            record.load_level = level  # type: ignore[attr-defined]
            records.append(record)
    acceptance = {"json@c1": {"qwen-sd-vllm": {"per_position": [0.9]}}, "json@r2": {"qwen-sd-vllm": {"per_position": [0.7]}}}
    points = sweep.points_from_run(run, records, acceptance)
    assert [(p.point_id, p.variant.k, dict(p.acceptance)) for p in points] == [
        ("qwen-sd-vllm-c1", 7, {"structured": 0.9}),
        ("qwen-sd-vllm-r2", 7, {"structured": 0.7}),
        ("baseline-c1", None, {}),
        ("baseline-r2", None, {}),
    ]


def test_bench_sized_sweep_is_analysed() -> None:
    result = sweep.analyze_sweep(synthetic_points(bench_truth(classes=2), requests=4), resamples=20)
    assert len(result.table) == 2 * 3 and len(result.classes[0].curves["c4"]) == 2
    assert result.to_dict()["classes"][0]["prompt_class"] == "class-0"


def test_a_load_without_a_baseline_is_no_crossover() -> None:
    """The best variant measured at 8 in flight but the baseline not: no speedup there, so no verdict."""
    points = [p for p in synthetic_points(TRUTH, requests=6) if not (p.variant.is_baseline and p.load == Load(CONCURRENCY, 8))]
    result = sweep.analyze_sweep(points, metric=sweep.TPOT, resamples=100)
    structured = next(c for c in result.classes if c.prompt_class == "structured")
    (crossing,) = [c for c in structured.crossovers if c.kind == CONCURRENCY]
    assert crossing.text == "pays at every measured load (up to 1 in flight)"
    assert "c8" not in structured.recommendations


def test_the_summary_merges_consecutive_loads_with_the_same_recommendation(analysis: sweep.SweepAnalysis) -> None:
    structured = next(c for c in analysis.classes if c.prompt_class == "structured")
    at_8 = structured.recommendations["c8"]
    assert (structured.recommendations["c1"].variant, at_8.variant) == ("qwen3-1-7b-k8", "qwen3-1-7b-k8")
    speedup = f"{at_8.speedup.point:.2f}x [{at_8.speedup.low:.2f}-{at_8.speedup.high:.2f}]"
    assert analysis.summary == [
        # Open-ended: k = 2 pays at 1 in flight, nothing does at 8; the rate is its own kind.
        analysis.table[0].split("; model")[0].split(" (indistinguishable")[0],
        "open-ended prompts at 8 in flight: no speculation (no variant is faster than the baseline)",
        analysis.table[2].split("; model")[0].split(" (indistinguishable")[0],
        f"structured prompts up to 8 in flight: Qwen3-1.7B, k = 8, {speedup} (at 8 in flight)",
        analysis.table[5].split("; model")[0].split(" (indistinguishable")[0],
    ]


def test_the_summary_names_a_range_that_does_not_start_at_the_lowest_load() -> None:
    def rec(variant: str) -> sweep.Recommendation:
        return sweep.Recommendation(variant, None, None, stats.Interval(None), sweep.E2E, [], {}, "")

    loads = [Load(CONCURRENCY, c) for c in (1, 2, 4, 8)]
    cls = sweep.ClassAnalysis("c", {}, {"c1": rec("a"), "c2": rec("b"), "c4": rec("b"), "c8": rec("b")}, "a", [], [], [], [])
    variants = {"a": sweep.Variant("a", "D", 3), "b": sweep.Variant("b", "D", 5)}
    assert sweep.summary_lines(cls, loads, variants) == [
        "c prompts at 1 in flight: D, k = 3",
        "c prompts from 2 to 8 in flight: D, k = 5 (at 8 in flight)",
    ]


def _streamed(variant: str, index: int, chunk_tokens: list[int]) -> RequestRecord:
    from specbench.results.records import COUNT_FROM_USAGE

    record = RequestRecord("p", variant, "case", "structured", "native", index, 0.0)
    record.chunk_tokens, record.token_count_source = list(chunk_tokens), COUNT_FROM_USAGE
    record.output_tokens = sum(chunk_tokens)
    return record


def test_without_metrics_a_points_acceptance_comes_from_the_stream_and_says_so() -> None:
    k = 7
    # Decode chunks (first and last left out) carry 4 and 2 tokens: mean acceptance length 3.
    spec = [_streamed("q-k7", i, [1, 4, 2, 4, 2, 1]) for i in range(3)]
    baseline = [_streamed(BASELINE_NAME, i, [1] * 8) for i in range(3)]
    point = sweep.Point("q-k7-c1", sweep.Variant("q-k7", "Qwen/Qwen3-1.7B", k, "draft"), Load(CONCURRENCY, 1), 0, tuple(spec))
    notes: list[str] = []
    a, source = sweep.point_acceptance(point, "structured", baseline, spec, notes)
    assert (a, source, notes) == (theory.acceptance_from_tokens_per_step(3.0, k), "stream", [])
    assert theory.expected_tokens_per_step(a, k) == pytest.approx(3.0)
    # /metrics, when the server has it, comes first.
    with_metrics = sweep.Point("q-k7-c1", point.variant, point.load, 0, tuple(spec), {"structured": 0.5})
    assert sweep.point_acceptance(with_metrics, "structured", baseline, spec, notes) == (0.5, "metrics")


def test_a_coalescing_stream_gives_no_acceptance_and_a_note_naming_why() -> None:
    spec = [_streamed("q-k7", 0, [1, 4, 2, 4, 2, 1])]
    coalesced = [_streamed(BASELINE_NAME, 0, [1, 3, 3, 1])]  # a proxy merged three baseline chunks
    point = sweep.Point("q-k7-c1", sweep.Variant("q-k7", "Qwen/Qwen3-1.7B", 7, "draft"), Load(CONCURRENCY, 1), 0, tuple(spec))
    notes: list[str] = []
    assert sweep.point_acceptance(point, "structured", coalesced, spec, notes) == (None, "")
    assert notes == [
        "structured, q-k7-c1: no acceptance from /metrics, and the stream's is unreliable: the baseline baseline streamed 3 "
        "tokens in one chunk (case #0; 1 expected): a server or proxy coalesces chunks"
    ]


def test_goodput_limits_default_to_the_deployments_sweep_slo() -> None:
    run = {"plan": {"deployment": {"sweep": {"slo": {"ttft_ms": 2000, "tpot_ms": 50}}}}}
    assert sweep.configured_slo(run) == Slo(2000, 50)
    assert sweep.configured_slo(run, tpot_ms=40) == Slo(2000, 40)  # a flag wins
    assert sweep.configured_slo({}) == Slo(None, None)
