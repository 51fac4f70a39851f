"""Exact values of specbench/analysis/cost.py, the first stage of its mutation run (issue 24,
scripts/mutation.toml): known timings give exact tokens per second and dollars; the bootstrap's
bounds are known because two requests of 10 and 30 tokens/s resample to exactly those extremes."""

from __future__ import annotations

import dataclasses
import math

import pytest

from specbench.analysis import cost, stats
from specbench.results.records import RequestRecord

PRICE = cost.NodePrice(36.0, "test")  # 1 cent a second: $250 per million at 40 tokens/s


def record(
    start: float, e2e: float | None, tokens: int | None, *, ttft: float | None = 0.1, tpot: float | None = 0.05, error=None, level=None
):
    r = RequestRecord("run", "v", "case", "class", "native", 0, start, error_code=error, load_level=level)
    r.end_to_end_latency_s, r.output_tokens, r.ttft_s, r.time_per_output_token_s = e2e, tokens, ttft, tpot
    return r


def test_the_constants_and_the_definitions_are_as_documented():
    assert (cost.SECONDS_PER_HOUR, cost.TOKENS_PER_MILLION, cost.NO_PRICE) == (3600.0, 1_000_000.0, "not computed (no price)")
    assert cost.BUSY_DEFINITION == (
        "a server is busy while at least one of its requests is in flight: the union of the windows "
        "[request written, end of stream] of its requests (failed ones included when their end is known); "
        "each request's share of it is its window divided, at every moment, by the requests then in flight"
    )
    assert cost.FIGURE_DEFINITIONS == {
        "busy_s": cost.BUSY_DEFINITION,
        "tokens_per_s_per_server": "output tokens of successful requests / busy seconds of that server",
        "tokens_per_s_per_node": "tokens_per_s_per_server x servers per node (logical NeuronCores per node // cores per server)",
        "cost_per_million_output_tokens": "node price per hour / 3600 / tokens_per_s_per_node x 1e6 (USD); "
        "'not computed (no price)' without a price, never 0",
        "goodput_cost_per_million_output_tokens": "the same for the tokens of requests within both SLOs (TTFT and TPOT, "
        "sweep.slo_*): busy time of every request over the tokens of those that met the SLOs",
        "cost_saving": "baseline cost per million - speculative cost per million (USD, and % of the baseline's; "
        "positive: the speculative service is cheaper, negative: dearer), "
        "bootstrap CI with each service's requests resampled independently",
    }


def test_cost_per_million_is_the_price_per_second_over_the_node_throughput():
    assert cost.cost_per_million_tokens(36.0, 40.0) == 250.0
    assert cost.cost_per_million_tokens(72.0, 1.0) == 20_000.0
    assert cost.cost_per_million_tokens(3600.0, 1_000_000.0) == 1.0
    # Missing, zero, negative or not finite, on either side: not computed (never 0).
    for price, rate in [(None, 40.0), (36.0, None), (0.0, 40.0), (-1.0, 40.0), (36.0, 0.0), (36.0, -5.0)]:
        assert cost.cost_per_million_tokens(price, rate) is None
    for bad in (math.nan, math.inf):
        assert cost.cost_per_million_tokens(bad, 40.0) is None
        assert cost.cost_per_million_tokens(36.0, bad) is None
    assert cost.cost_per_million_tokens(1e-9, 1e-9) == pytest.approx(1e6 / 3600)  # tiny but positive still counts


def test_servers_per_node_is_the_whole_number_that_fits():
    assert cost.servers_per_node(64, 32) == 2
    assert cost.servers_per_node(64, 33) == 1
    assert cost.servers_per_node(1, 1) == 1
    assert cost.servers_per_node(65, 16) == 4
    with pytest.raises(ValueError) as error:
        cost.servers_per_node(64, 0)
    assert str(error.value) == "cores per server 0 and per node 64 must be at least 1"
    with pytest.raises(ValueError) as error:
        cost.servers_per_node(0, 1)
    assert str(error.value) == "cores per server 1 and per node 0 must be at least 1"
    with pytest.raises(ValueError) as error:
        cost.servers_per_node(31, 32)
    assert str(error.value) == "a server of 32 logical cores does not fit a node of 31"


def test_busy_shares_divide_every_moment_between_the_requests_in_flight():
    # 0-1 alone, 1-3 three at once, 3-4 two, 4-6 alone; a window of zero and one of negative length get 0.
    windows = [(0.0, 4.0), (1.0, 3.0), (1.0, 6.0), (2.0, 2.0), (5.0, 4.0)]
    assert cost.busy_shares(windows) == pytest.approx([1.0 + 2 / 3 + 0.5, 2 / 3, 2 / 3 + 0.5 + 2.0, 0.0, 0.0], rel=1e-12)
    assert cost.busy_seconds(windows) == pytest.approx(6.0, rel=1e-12)
    # Two requests starting together, one ending where the next begins (no gap, no overlap).
    assert cost.busy_shares([(0.0, 2.0), (0.0, 2.0), (2.0, 3.0)]) == [1.0, 1.0, 1.0]
    assert cost.busy_shares([(10.0, 12.0)]) == [2.0]
    assert cost.busy_shares([]) == [] and cost.busy_seconds([]) == 0.0
    assert cost.busy_shares([(3.0, 3.0)]) == [0.0]
    # An idle gap is not paid for: 0-1 and 5-7 are 3 s busy, not 7.
    assert cost.busy_seconds([(5.0, 7.0), (0.0, 1.0)]) == 3.0
    # A share is accumulated from 0: a window a nanosecond long keeps its every bit.
    assert cost.busy_shares([(0.0, 1e-9)]) == [1e-9]
    assert cost.busy_shares([(2.0, 2.0 + 2**-30), (2.0, 2.0 + 2**-30)]) == [2**-31, 2**-31]


def test_a_request_window_runs_from_sent_to_the_end_of_its_stream():
    assert cost.window(record(100.0, 2.5, 10)) == (100.0, 102.5)
    assert cost.window(record(100.0, 0.0, 10)) == (100.0, 100.0)
    assert cost.window(record(100.0, None, 10)) is None
    assert cost.window(record(100.0, -0.1, 10)) is None
    assert cost.window(record(100.0, math.nan, 10)) is None


def test_within_slo_includes_the_limits_themselves():
    ok = record(0.0, 1.0, 10, ttft=0.2, tpot=0.1)
    assert cost.within_slo(ok, 200.0, 100.0)  # exactly at both limits
    assert cost.within_slo(ok, None, None)
    assert not cost.within_slo(ok, 199.0, 100.0)
    assert not cost.within_slo(ok, 200.0, 99.0)
    assert cost.within_slo(ok, None, 100.0) and cost.within_slo(ok, 200.0, None)
    assert not cost.within_slo(record(0.0, 1.0, 10, error=500), None, None)
    no_ttft = record(0.0, 1.0, 10, ttft=None, tpot=0.01)
    assert not cost.within_slo(no_ttft, 1000.0, None) and cost.within_slo(no_ttft, None, 1000.0)
    no_tpot = record(0.0, 1.0, 10, ttft=0.01, tpot=None)
    assert not cost.within_slo(no_tpot, None, 1000.0) and cost.within_slo(no_tpot, 1000.0, None)


def test_shares_give_tokens_of_successes_good_tokens_within_the_slos_and_busy_time():
    records = [
        record(0.0, 4.0, 100, ttft=0.1, tpot=0.01),  # good
        record(2.0, 4.0, 50, ttft=0.5, tpot=0.01),  # too slow a start
        record(3.0, 2.0, 7, error=500),  # failed: busy time, no tokens
        record(9.0, None, 999),  # no end: left out
        record(10.0, 1.0, None, ttft=None, tpot=None),  # succeeded without a token count
    ]
    items = cost.shares(records, ttft_ms=200.0, tpot_ms=20.0)
    assert [(s.tokens, s.good_tokens) for s in items] == [(100, 100), (50, 0), (0, 0), (0, 0)]
    expected = [2.0 + 1.0 / 2 + 1.0 / 3, 1.0 / 2 + 1.0 / 3 + 1.0 / 2 + 1.0, 1.0 / 3 + 1.0 / 2, 1.0]
    assert [s.busy_s for s in items] == pytest.approx(expected, rel=1e-12)
    # Without SLOs every success is good.
    assert [s.good_tokens for s in cost.shares(records)] == [100, 50, 0, 0]
    assert cost.shares([]) == []


def test_tokens_per_second_is_a_ratio_of_sums():
    items = [cost.Share(100, 100, 2.0), cost.Share(300, 0, 8.0)]
    assert cost.tokens_per_second(items) == 40.0
    assert cost.tokens_per_second(items, good_only=True) == 10.0
    assert cost.tokens_per_second([cost.Share(0, 0, 5.0)]) is None  # busy but nothing delivered
    assert cost.tokens_per_second([cost.Share(10, 10, 0.0)]) is None  # no busy time
    assert cost.tokens_per_second([]) is None
    assert cost.tokens_per_second([cost.Share(1, 1, 1e-9)]) == pytest.approx(1e9)
    assert cost.tokens_per_second([cost.Share(1, 0, 1.0)], good_only=True) is None


def test_records_throughput_is_per_node():
    records = [record(0.0, 10.0, 100), record(10.0, 10.0, 300)]
    assert cost.records_throughput(records) == 20.0
    assert cost.records_throughput(records, 3) == 60.0
    assert cost.records_throughput([record(0.0, 10.0, 5, error=500)], 2) is None


def test_a_node_price_knows_whether_it_is_one_and_says_where_it_came_from():
    assert PRICE.known and PRICE.describe() == "$36.00 per node-hour (test)"
    assert cost.NodePrice(35.756).describe() == "$35.76 per node-hour"
    assert cost.NodePrice(35.756).source == ""
    assert PRICE.to_dict() == {"per_hour": 36.0, "source": "test"}
    for unknown in (cost.NodePrice(None, "x"), cost.NodePrice(0.0, "x"), cost.NodePrice(-1.0, "x")):
        assert not unknown.known and unknown.describe() == "not computed (no price)"
    assert cost.NodePrice(1e-6).known


def test_the_figures_are_immutable_values():
    share, price = cost.Share(1, 1, 1.0), cost.NodePrice(36.0)
    saved = cost.Saving("s", "c1", stats.Interval(1.0), stats.Interval(2.0))
    figures = cost.throughput("v", "c1", [share], 1, price)
    for value, name in ((share, "tokens"), (price, "per_hour"), (saved, "variant"), (figures, "requests")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(value, name, 0)
    assert len({share, cost.Share(1, 1, 1.0), price, cost.NodePrice(36.0)}) == 2
    assert (saved.goodput_dollars, saved.goodput_percent) == (None, None)


def test_a_price_given_by_a_person_is_a_finite_number_at_least_zero():
    message = "must be a number >= 0 (USD per node-hour; 0 = no price, cost not computed)"
    assert [cost.price_problem(v) for v in (-0.01, math.nan, math.inf, -math.inf)] == [message] * 4
    assert cost.price_problem(0.0) == "" and cost.price_problem(35.76) == ""


def test_the_recorded_price_and_its_source():
    assert cost.recorded_price({"cost": {"node_price_per_hour": 35, "price_source": "offer"}}) == cost.NodePrice(35.0, "offer")
    assert isinstance(cost.recorded_price({"cost": {"node_price_per_hour": 35}}).per_hour, float)
    # A run from before prices had sources: its price, saying the source is unknown (issue 34).
    assert cost.recorded_price({"cost": {"node_price_per_hour": 35.5}}) == cost.NodePrice(35.5, "source unknown: the run recorded none")
    assert cost.recorded_price({"cost": {"node_price_per_hour": 0.5, "price_source": "spot"}}) == cost.NodePrice(0.5, "spot")
    # 0 is "no price" and keeps its reason; anything else unusable is no price without one.
    assert cost.recorded_price({"cost": {"node_price_per_hour": 0, "price_source": "no price set"}}) == cost.NodePrice(None, "no price set")
    assert cost.recorded_price({"cost": {"node_price_per_hour": 0}}) == cost.NodePrice(None, "")
    assert cost.recorded_price({"cost": {"node_price_per_hour": None, "price_source": "s"}}) == cost.NodePrice(None, "")
    for bad in (True, -3.0, math.nan, math.inf, "36"):  # refused, saying why (tests/test_cost_inputs.py)
        refused = cost.recorded_price({"cost": {"node_price_per_hour": bad, "price_source": "s"}})
        assert refused.per_hour is None and refused.source.startswith(f"no price: the run's cost.node_price_per_hour {bad!r} ")
    assert cost.recorded_price(None) == cost.NodePrice(None, "")
    assert cost.recorded_price({"cost": None}) == cost.NodePrice(None, "")


def test_the_recorded_servers_per_node_and_how_they_were_found():
    assert cost.recorded_servers_per_node({"cost": {"servers_per_node": 3, "servers_per_node_source": "src"}}) == (3, "src")
    assert cost.recorded_servers_per_node({"cost": {"servers_per_node": 1}}) == (1, "the run's settings")
    derived = {"cost": {"logical_cores_per_node": 64}, "serving": {"tensor_parallel_size": 16}}
    assert cost.recorded_servers_per_node(derived) == (4, "64 logical cores per node // TP 16")
    # An unusable count falls back to the cores, then to 1.
    assert cost.recorded_servers_per_node({**derived, "cost": {"servers_per_node": 0, "logical_cores_per_node": 64}})[0] == 4
    assert cost.recorded_servers_per_node({**derived, "cost": {"servers_per_node": "2", "logical_cores_per_node": 64}})[0] == 4
    fallback = (1, "not recorded in the run: taken as 1 server per node")
    assert cost.recorded_servers_per_node({"cost": {"logical_cores_per_node": 16}, "serving": {"tensor_parallel_size": 32}}) == fallback
    assert cost.recorded_servers_per_node({"cost": {"logical_cores_per_node": 64}}) == fallback
    assert cost.recorded_servers_per_node({"serving": {"tensor_parallel_size": 32}}) == fallback
    assert cost.recorded_servers_per_node({"cost": None, "serving": None}) == fallback
    assert cost.recorded_servers_per_node(None) == fallback


# Two requests one after the other: 100 tokens in 10 s, then 300 in 10 s: 10 and 30 tokens/s, 20 pooled.
# Two-element resamples are {a, a}, {a, b} or {b, b}: with 200 of them both extremes fall inside the
# 2.5% tails, so the 95% interval is exactly [10, 30] per server.
TWO = [cost.Share(100, 100, 10.0), cost.Share(300, 0, 10.0)]


def test_throughput_and_cost_with_their_intervals_on_known_timings():
    figures = cost.throughput("spec", "c2", TWO, 2, PRICE, resamples=200)
    assert (figures.variant, figures.level, figures.requests, figures.output_tokens, figures.busy_s) == ("spec", "c2", 2, 400, 20.0)
    assert figures.servers_per_node == 2
    assert figures.per_server == stats.Interval(20.0, 10.0, 30.0, 0.95, 200)
    assert figures.per_node == stats.Interval(40.0, 20.0, 60.0, 0.95, 200)
    # Cost falls as throughput rises: the node's 60 tokens/s bound gives the low cost.
    assert figures.cost_per_million == stats.Interval(250.0, 36.0 / 3600 / 60 * 1e6, 500.0, 0.95, 200)
    assert figures.goodput_per_node is None and figures.goodput_cost_per_million is None
    # Goodput: only the first request's 100 tokens over all 20 s busy, x 2 servers = 10 tokens/s per node.
    good = cost.throughput("spec", "c2", TWO, 2, PRICE, slo=True, resamples=200, confidence=0.5)
    assert good.goodput_per_node.point == 10.0 and good.goodput_per_node.confidence == 0.5
    assert good.goodput_cost_per_million.point == 1000.0
    assert good.per_server.confidence == 0.5 and good.cost_per_million.confidence == 0.5


def test_throughput_defaults_seed_resamples_and_confidence():
    items = [cost.Share(10 * n, 10 * n, 1.0 + n % 3) for n in range(1, 9)]
    default = cost.throughput("v", "c1", items, 1, PRICE)
    assert default.per_server.resamples == 2000 and default.per_server.confidence == 0.95
    assert default == cost.throughput("v", "c1", items, 1, PRICE, seed=0, resamples=2000, confidence=0.95)
    assert default.per_server != cost.throughput("v", "c1", items, 1, PRICE, seed=1).per_server


def test_throughput_without_requests_or_price():
    empty = cost.throughput("v", "c1", [], 2, PRICE, slo=True)
    assert empty.per_server == stats.Interval(None) and empty.per_node == stats.Interval(None)
    assert empty.cost_per_million == stats.Interval(None) and empty.goodput_per_node is None
    assert (empty.requests, empty.output_tokens, empty.busy_s) == (0, 0, 0.0)
    unpriced = cost.throughput("v", "c1", TWO, 2, cost.NodePrice(None), resamples=200, confidence=0.9)
    assert unpriced.per_node.point == 40.0
    assert unpriced.cost_per_million == stats.Interval(None, confidence=0.9)
    # One request: a point, no interval, and the cost follows (a point, no bounds).
    one = cost.throughput("v", "c1", TWO[:1], 2, PRICE, resamples=200)
    assert one.per_node == stats.Interval(20.0, None, None, 0.95, 0)
    assert one.cost_per_million == stats.Interval(500.0, None, None, 0.95, 0)
    assert one.to_dict()["cost_per_million"] == {"point": 500.0, "low": None, "high": None, "confidence": 0.95, "resamples": 0}


def test_a_known_interval_whose_bound_has_no_cost_keeps_the_point_only():
    # A lower bound of 0 tokens/s has no cost: the point stays, both bounds go.
    interval = cost._cost_of(stats.Interval(40.0, 0.0, 60.0, 0.9, 100), PRICE)
    assert interval == stats.Interval(250.0, None, None, 0.9, 100)
    assert cost._cost_of(stats.Interval(40.0, 20.0, 0.0, 0.9, 100), PRICE) == stats.Interval(250.0, None, None, 0.9, 100)
    assert cost._cost_of(stats.Interval(40.0, 20.0, None, 0.9, 100), PRICE) == stats.Interval(250.0, None, None, 0.9, 100)
    assert cost._scaled(stats.Interval(2.0, None, 3.0, 0.8, 7), 3) == stats.Interval(6.0, None, 9.0, 0.8, 7)


# Baseline 10 tokens/s per server, speculative 20 (two requests each, in sequence, equal rates: every
# resample gives the same figure, so the interval is the point).
BASE = [cost.Share(100, 100, 10.0), cost.Share(100, 0, 10.0)]
SPEC = [cost.Share(100, 100, 5.0), cost.Share(100, 100, 5.0)]


def test_the_saving_in_dollars_and_percent_of_the_baseline():
    result = cost.saving("s", "c1", BASE, SPEC, 2, 1, PRICE, resamples=100, confidence=0.9)
    # Baseline 20 tokens/s per node: $500 per million; speculative 20 per node (1 server): $500 too.
    assert (result.variant, result.level) == ("s", "c1")
    assert result.dollars == stats.Interval(0.0, 0.0, 0.0, 0.9, 100)
    result = cost.saving("s", "c1", BASE, SPEC, 1, 2, PRICE, resamples=100)
    # $1000 against $250 per million: $750 (75%) saved.
    assert result.dollars == stats.Interval(750.0, 750.0, 750.0, 0.95, 100)
    assert result.percent == stats.Interval(75.0, 75.0, 75.0, 0.95, 100)
    assert result.goodput_dollars is None and result.goodput_percent is None
    good = cost.saving("s", "c1", BASE, SPEC, 1, 2, PRICE, slo=True, resamples=100)
    # Goodput: the baseline's 100 good tokens over 20 s (5/s, $2000), the speculative 40/s ($250).
    assert good.goodput_dollars.point == 1750.0 and good.goodput_percent.point == 87.5
    assert good.dollars.point == 750.0


def test_the_saving_defaults_and_when_there_is_none():
    varied = [cost.Share(10 * n, 10 * n, 1.0 + n % 3) for n in range(1, 9)]
    default = cost.saving("s", "c1", varied, SPEC, 1, 1, PRICE)
    assert default.dollars.resamples == 2000 and default.dollars.confidence == 0.95
    assert default == cost.saving("s", "c1", varied, SPEC, 1, 1, PRICE, seed=0, resamples=2000, confidence=0.95)
    assert default.dollars != cost.saving("s", "c1", varied, SPEC, 1, 1, PRICE, seed=3).dollars
    assert cost.saving("s", "c1", BASE, SPEC, 1, 1, cost.NodePrice(None)) is None
    assert cost.saving("s", "c1", [], SPEC, 1, 1, PRICE) is None
    assert cost.saving("s", "c1", BASE, [], 1, 1, PRICE) is None
    # A service that delivered nothing has no cost: no saving to give.
    nothing = [cost.Share(0, 0, 5.0), cost.Share(0, 0, 5.0)]
    assert cost.saving("s", "c1", BASE, nothing, 1, 1, PRICE).dollars.point is None
    assert cost.saving("s", "c1", nothing, SPEC, 1, 1, PRICE).percent.point is None


def test_describe_cost():
    assert cost.describe_cost(stats.Interval(4.123, 3.981, 4.304), PRICE) == "$4.12 (3.98-4.30)"
    assert cost.describe_cost(stats.Interval(4.125), PRICE) == "$4.12"
    assert cost.describe_cost(stats.Interval(None), PRICE) == "n/a"
    assert cost.describe_cost(None, PRICE) == "n/a"
    assert cost.describe_cost(stats.Interval(4.0, 3.0, 5.0), cost.NodePrice(None)) == "not computed (no price)"


def test_describe_saving_signs_a_saving_positive():
    # baseline - speculative, as run.json's figure_definitions.cost_saving defines it.
    interval = stats.Interval
    saved = cost.Saving("s", "c1", interval(2.1, 2.0, 2.2), interval(51.0, 49.0, 53.0), interval(-1.5), interval(-10.0))
    assert cost.describe_saving(saved, PRICE) == "+$2.10 (+51%; 95% CI +$2.00 to +$2.20, +49% to +53%)"
    assert cost.describe_saving(saved, PRICE, goodput=True) == "-$1.50 (-10%)"
    dearer = cost.Saving("s", "c1", interval(-0.5), interval(-12.4, -20.0, -5.0, 0.9))
    assert cost.describe_saving(dearer, PRICE) == "-$0.50 (-12%; 90% CI -20% to -5%)"
    small = cost.Saving("s", "c1", interval(0.001), interval(0.2))
    assert cost.describe_saving(small, PRICE) == "+$0.0010 (+0.20%)"
    # No change is neither a saving nor a loss: no sign.
    assert cost.describe_saving(cost.Saving("s", "c1", interval(0.0), interval(0.0)), PRICE) == "$0.00 (0%)"
    assert cost.describe_saving(dearer, PRICE, goodput=True) == "n/a"  # no goodput figures
    assert cost.describe_saving(cost.Saving("s", "c1", interval(None), interval(1.0)), PRICE) == "n/a"
    assert cost.describe_saving(cost.Saving("s", "c1", interval(1.0), interval(None)), PRICE) == "n/a"
    assert cost.describe_saving(cost.Saving("s", "c1", interval(1.0), interval(1.0), interval(1.0), None), PRICE, True) == "n/a"
    assert cost.describe_saving(None, PRICE) == "n/a"
    assert cost.describe_saving(saved, cost.NodePrice(None)) == "not computed (no price)"


def test_levels_in_order_of_first_appearance():
    records = [record(0, 1, 1, level="c4"), record(0, 1, 1), record(0, 1, 1, level="c1"), record(0, 1, 1, level="c4")]
    assert cost.level_label(records[0], "c9") == "c4" and cost.level_label(records[1], "c9") == "c9"
    assert cost.group_levels(records, "c2") == ["c4", "c2", "c1"]
    assert cost.group_levels([record(0, 1, 1, level="")], "c2") == ["c2"]
