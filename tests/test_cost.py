"""Throughput per server and node, and cost per million output tokens (specbench/analysis/cost.py):
exact figures on records with known timings."""

from __future__ import annotations

import statistics

import pytest

from specbench.analysis import cost, sweep
from specbench.analysis.aggregate import summarize_run
from specbench.results.records import RequestRecord


def record(variant: str, start: float, e2e: float, tokens: int, *, case: str = "json", ttft: float = 0.1, error: int | None = None):
    r = RequestRecord("run", variant, case, "structured", "native", 0, start, error_code=error)
    if error is None:
        r.end_to_end_latency_s, r.output_tokens, r.ttft_s = e2e, tokens, ttft
        r.time_per_output_token_s = (e2e - ttft) / (tokens - 1)
    return r


def test_cost_per_million_tokens_is_price_per_second_over_tokens_per_second() -> None:
    assert cost.cost_per_million_tokens(36.0, 40.0) == pytest.approx(250.0)
    assert cost.cost_per_million_tokens(35.76, 100.0) == pytest.approx(35.76 / 3600 / 100 * 1e6)
    # No price or no throughput: not computed, never 0.
    assert cost.cost_per_million_tokens(None, 40.0) is None
    assert cost.cost_per_million_tokens(0.0, 40.0) is None
    assert cost.cost_per_million_tokens(36.0, 0.0) is None
    assert cost.cost_per_million_tokens(36.0, None) is None
    assert cost.cost_per_million_tokens(float("nan"), 40.0) is None


def test_servers_per_node_from_cores() -> None:
    assert cost.servers_per_node(64, 32) == 2  # trn2.48xlarge at LNC=2, TP 32
    assert cost.servers_per_node(64, 16) == 4
    assert cost.servers_per_node(128, 32) == 4  # LNC=1
    with pytest.raises(ValueError, match="does not fit"):
        cost.servers_per_node(32, 64)


def test_busy_shares_split_overlaps_and_sum_to_the_union() -> None:
    assert cost.busy_shares([(0, 10), (5, 15)]) == [7.5, 7.5]
    assert cost.busy_shares([(0, 2), (1, 3), (10, 11)]) == [1.5, 1.5, 1.0]
    # Nested windows: 0-1 alone, 1-2 with the inner one, 2-4 alone.
    assert cost.busy_shares([(0, 4), (1, 2)]) == [3.5, 0.5]
    assert cost.busy_seconds([(0, 4), (1, 2), (10, 12), (11, 13)]) == 4 + 3
    assert cost.busy_shares([(5, 5)]) == [0.0]
    assert cost.busy_shares([]) == []


def test_throughput_and_cost_on_known_timings() -> None:
    records = [record("base", 100.0, 10.0, 100), record("base", 105.0, 10.0, 200)]
    items = cost.shares(records)
    assert [s.busy_s for s in items] == [7.5, 7.5]
    assert cost.tokens_per_second(items) == pytest.approx(300 / 15)
    figures = cost.throughput("base", "c2", items, 2, cost.NodePrice(36.0, "test"), resamples=200)
    assert figures.busy_s == 15.0 and figures.output_tokens == 300
    assert figures.per_server.point == pytest.approx(20.0)
    assert figures.per_node.point == pytest.approx(40.0)
    assert figures.cost_per_million.point == pytest.approx(250.0)
    assert figures.cost_per_million.known
    assert figures.cost_per_million.low <= 250.0 <= figures.cost_per_million.high
    no_price = cost.throughput("base", "c2", items, 2, cost.NodePrice(None), resamples=200)
    assert no_price.per_node.point == pytest.approx(40.0) and no_price.cost_per_million.point is None
    assert cost.describe_cost(no_price.cost_per_million, cost.NodePrice(None)) == "not computed (no price)"


def test_a_failed_request_costs_busy_time_and_delivers_nothing() -> None:
    failed = record("base", 0.0, 0.0, 0, error=500)
    failed.end_to_end_latency_s = 5.0  # it timed out after 5 s
    items = cost.shares([record("base", 0.0, 10.0, 100), failed])
    assert cost.tokens_per_second(items) == pytest.approx(100 / 10)
    # A failure with no known end takes no time (it cannot be placed).
    assert len(cost.shares([record("base", 0.0, 10.0, 100), record("base", 0, 0, 0, error=-1)])) == 1


def test_goodput_counts_only_tokens_within_the_slos() -> None:
    fast = record("base", 0.0, 10.0, 101, ttft=0.05)  # TPOT 99.5 ms
    slow_start = record("base", 10.0, 10.0, 101, ttft=0.5)
    items = cost.shares([fast, slow_start], ttft_ms=200, tpot_ms=100)
    assert cost.tokens_per_second(items, good_only=True) == pytest.approx(101 / 20)
    figures = cost.throughput("base", "c1", items, 1, cost.NodePrice(36.0), slo=True, resamples=200)
    assert figures.goodput_per_node.point == pytest.approx(101 / 20)
    assert figures.goodput_cost_per_million.point == pytest.approx(36.0 / 3600 / (101 / 20) * 1e6)


def test_saving_against_the_baseline_in_dollars_and_percent() -> None:
    base = cost.shares([record("b", 0.0, 10.0, 100), record("b", 10.0, 10.0, 100)])  # 10 tokens/s
    spec = cost.shares([record("s", 0.0, 5.0, 100), record("s", 5.0, 5.0, 100)])  # 20 tokens/s
    result = cost.saving("s", "c1", base, spec, 2, 2, cost.NodePrice(36.0), resamples=200)
    # 36 $/h over 20 tokens/s per node = $500 per million; over 40 = $250.
    assert result.dollars.point == pytest.approx(250.0)
    assert result.percent.point == pytest.approx(50.0)
    assert cost.describe_saving(result, cost.NodePrice(36.0)).startswith("+$250.00 (+50%")
    assert cost.saving("s", "c1", base, spec, 2, 2, cost.NodePrice(None)) is None


def test_the_sweep_uses_the_same_busy_definition() -> None:
    # Two requests overlapping, then a gap the server was idle in: busy is the union (2.5 + 1 s), not the span (4 s).
    records = [record("v", 0.0, 2.0, 100), record("v", 0.5, 2.0, 100), record("v", 3.0, 1.0, 100)]
    assert sweep.node_throughput(records) == pytest.approx(300 / 3.5)
    assert sweep.node_throughput(records, servers_per_node=2) == pytest.approx(cost.records_throughput(records, 2))


def test_recorded_price_and_servers_from_the_settings() -> None:
    settings = {"cost": {"node_price_per_hour": 35.76, "price_source": "Capacity Block", "servers_per_node": 2}}
    assert cost.recorded_price(settings) == cost.NodePrice(35.76, "Capacity Block")
    assert cost.recorded_servers_per_node(settings)[0] == 2
    assert not cost.recorded_price({}).known
    assert not cost.recorded_price({"cost": {"node_price_per_hour": 0, "price_source": "no price set"}}).known
    derived = {"cost": {"logical_cores_per_node": 64}, "serving": {"tensor_parallel_size": 32}}
    assert cost.recorded_servers_per_node(derived) == (2, "64 logical cores per node // TP 32")
    assert cost.recorded_servers_per_node({})[0] == 1


def _run(price: float | None) -> dict:
    deployment = {
        "variants": [{"name": "base", "draft_model": ""}, {"name": "spec", "draft_model": "d", "num_speculative_tokens": 7}],
        "cost": {"servers_per_node": 2, "slo": {"ttft_ms": 200, "tpot_ms": 100}},
    }
    if price is not None:
        deployment["cost"].update(node_price_per_hour=price, price_source="test price")
    return {"run_id": "r", "status": "completed", "plan": {"load": {"concurrency": 1, "requests": 2}, "deployment": deployment}}


def test_summary_carries_throughput_cost_and_saving_per_group_and_level() -> None:
    records = [
        record("base", 0.0, 10.0, 101),
        record("base", 10.0, 10.0, 101),
        record("spec", 0.0, 5.0, 101),
        record("spec", 5.0, 5.0, 101),
    ]
    summary = summarize_run(_run(36.0), records, {}, resamples=200)
    group = summary.group("structured")
    base, spec = group.variants["base"].throughput[0], group.variants["spec"].throughput[0]
    assert (base.level, base.servers_per_node) == ("c1", 2)
    assert base.per_node.point == pytest.approx(2 * 202 / 20)
    assert spec.per_node.point == pytest.approx(2 * 202 / 10)
    assert base.cost_per_million.point == pytest.approx(36 / 3600 / (2 * 202 / 20) * 1e6)
    saving = group.comparisons[0].savings[0]
    assert saving.percent.point == pytest.approx(50.0)
    assert summary.price.describe() == "$36.00 per node-hour (test price)"
    # Without a price: throughput still, cost not computed.
    unpriced = summarize_run(_run(None), records, {}, resamples=200).group("structured")
    assert unpriced.variants["base"].throughput[0].per_node.point == pytest.approx(base.per_node.point)
    assert unpriced.variants["base"].throughput[0].cost_per_million.point is None
    assert unpriced.comparisons[0].savings == [None]


# --- the price as a setting ----------------------------------------------------------------------


def test_the_price_defaults_to_the_catalog_entry_of_its_region_and_mode_and_is_overridable() -> None:
    from config import ConfigError, load_config
    from config.cost import node_price

    default = load_config({}, {})
    assert default.results.node_price_per_hour is None  # left out: the catalog's entry (tests/test_price_catalog.py)
    price, source = node_price(default)
    assert price == 14.56 and "us-east-2 (on-demand)" in source and "2026-12" in source
    assert node_price(load_config({"results.node_price_per_hour": "12.5"}, {})) == (12.5, "setting results.node_price_per_hour")
    assert node_price(load_config({"results.node_price_per_hour": 0}, {}))[0] is None
    for bad in ("-3", "nan", "5000"):
        with pytest.raises(ConfigError, match="results.node_price_per_hour"):
            load_config({"results.node_price_per_hour": bad}, {})


def test_the_cli_flags_validate_the_price_in_one_line(capsys) -> None:
    from specbench import cli
    from specbench.commands import common

    for command in (["report", "some-run"], ["sweep-report", "--sweep-id", "x"], ["run"]):
        with pytest.raises(SystemExit) as exit_:
            cli.main([*command, "--node-price-per-hour", "-1"])
        assert exit_.value.code == 2
        assert "--node-price-per-hour" in capsys.readouterr().err
    settings = common.with_price({"cost": {"servers_per_node": 2}}, 20.0, "flag")
    assert settings["cost"] == {"servers_per_node": 2, "node_price_per_hour": 20.0, "price_source": "flag"}
    assert cost.recorded_price(common.with_price({}, 0.0, "flag")) == cost.NodePrice(None, "no price (flag 0): cost not computed")


# --- end to end: a paced server of known throughput ----------------------------------------------

STEP_S, OUTPUT_TOKENS, IN_FLIGHT, K = 0.005, 120, 4, 3  # requests of 0.6 s and 0.155 s, two waves of 4


def union_length(windows: list[tuple[float, float]]) -> float:
    """The length of the windows' union, by merging sorted windows (not cost.busy_seconds: the
    reference must not share the code it checks)."""
    total, end = 0.0, float("-inf")
    for start, stop in sorted(windows):
        if stop > end:
            total += stop - max(start, end)
            end = stop
    return total


@pytest.mark.servers  # real-time loopback servers: scheduled first (tests/conftest.py)
def test_throughput_and_cost_of_a_run_against_paced_servers_match_the_servers_own_record(tmp_path, capsys) -> None:
    """Emulated servers paced exactly: the first token one step after arrival, then one step per
    chunk; the baseline streams 1 token a step, the speculative one k + 1 (every draft accepted, a
    free draft). The ground truth is what each server did, on its own clock: arrival to [DONE] of
    every request. Each request's window as the client measured it holds the server's (sent before
    the server received it, [DONE] read after the server wrote it), so the client's busy time lies
    between the server's and the server's plus what the windows add; throughput, price and saving
    follow from it exactly. The pacing is checked on the server's plan, which no machine load moves:
    these bounds hold on a busy machine too (issue 24)."""
    import json
    import re

    from specbench import cli
    from specbench.emulator.server import EmulatorProfile, EmulatorServer
    from specbench.results.runfiles import load_run
    from specbench.results.store import LocalStore, RunStore
    from tests.runs import emulated_run_args

    common = {"target_step_s": STEP_S, "prefill_base_s": STEP_S, "prefill_s_per_token": 0.0, "default_acceptance": 1.0}
    baseline = EmulatorProfile(**common)
    speculative = EmulatorProfile(**common, num_speculative_tokens=K, draft_cost_ratio=0.0)
    steps = {"base": OUTPUT_TOKENS, "spec": 1 + -(-(OUTPUT_TOKENS - 1) // (K + 1))}  # 120 and 1 + 30
    settings = tmp_path / "settings.json"
    deployment = {
        "variants": [{"name": "qwen-vllm", "draft_model": ""}, {"name": "qwen-sd-vllm", "draft_model": "d", "num_speculative_tokens": K}],
        "cost": {"node_price_per_hour": 36.0, "price_source": "test", "servers_per_node": 2},
    }
    settings.write_text(json.dumps(deployment))
    with EmulatorServer(baseline) as base_server, EmulatorServer(speculative) as spec_server:
        args = emulated_run_args(base_server, spec_server, tmp_path, "--test-case", "counting", "--run-id", "paced", "--no-publish")
        args += ["--output-tokens", str(OUTPUT_TOKENS), "--concurrency", str(IN_FLIGHT), "--requests", "8", "--settings", str(settings)]
        assert cli.main(args) == 0
        served = {"base": base_server.truth, "spec": spec_server.truth}
    # specbench run prints them per class, with intervals and the price it used.
    printed = capsys.readouterr().out
    assert "cost per million output tokens at $36.00 per node-hour (test); 2 servers per node" in printed
    # The load per server and per node; the saving baseline - speculative (positive: cheaper), as run.json defines it.
    row = r"structured +c4: 4 in flight per server, 8 per node +qwen-sd-vllm +\d+\.\d \(\d+\.\d-\d+\.\d\) +\$\d+\.\d\d \(.*\) +\+\$\d+\.\d\d \(\+\d+%"
    assert re.search(row, printed), printed
    assert "saving vs baseline (baseline - speculative; + is cheaper)" in printed
    files = load_run(RunStore(LocalStore(tmp_path), "paced"))
    assert "union" in files.run["figure_definitions"]["busy_s"]
    summary = summarize_run(files.run, files.records, files.acceptance, resamples=200)
    group = summary.group("counting")
    variants = {"base": "qwen-vllm", "spec": "qwen-sd-vllm"}
    bounds = {}
    for name, records in served.items():
        done = {t.request_id: t for t in records if t.e2e_s is not None}
        mine = [r for r in files.records if r.variant == variants[name]]
        assert len(done) == len(mine) == 8
        for t in done.values():
            # The pacing it was set to, on the server's plan: one chunk a step, each step STEP_S
            # (a gap spans whole steps: another request's prefill step may come between).
            assert len(t.chunk_tokens) == steps[name] and t.output_tokens == OUTPUT_TOKENS, name
            gaps = [(b - a) / STEP_S for a, b in zip(t.planned_offsets_s, t.planned_offsets_s[1:], strict=False)]
            assert all(g >= 1 - 1e-6 and abs(g - round(g)) < 1e-6 for g in gaps), (name, gaps)
        windows, extra, lead = [], 0.0, []
        for r in mine:
            t = done[f"paced-{variants[name]}-counting-{r.request_index}"]
            sent, read = r.sent_monotonic_s, r.sent_monotonic_s + r.end_to_end_latency_s
            # Same clock, causal: [DONE] read after the server wrote it; the request sent before
            # the server answered (the client stamps just after its write, so a preempted client
            # may stamp after the server read it: that order is checked on the median below).
            assert sent <= t.arrival_s + t.ttft_s and t.arrival_s + t.e2e_s <= read, (name, r.request_index)
            lead.append(t.arrival_s - sent)
            windows.append((t.arrival_s, t.arrival_s + t.e2e_s))
            extra += r.end_to_end_latency_s - t.e2e_s
        assert statistics.median(lead) >= 0, (name, lead)
        # The client's windows hold the servers' but for a late "sent" stamp's shortfall, which the
        # lower bound of the client's busy time allows for.
        shortfall = sum(max(0.0, -x) for x in lead)
        truth_busy = union_length(windows)
        bounds[name] = (8 * OUTPUT_TOKENS / (truth_busy + extra + 0.002), 8 * OUTPUT_TOKENS / max(truth_busy - shortfall - 0.002, 1e-9))
    measured = {name: group.variants[variant].throughput[0] for name, variant in variants.items()}
    print(f"paced servers: tokens/s the servers' record allows {bounds}, measured { {n: f.per_server.point for n, f in measured.items()} }")
    for name, figures in measured.items():
        low, high = bounds[name]
        assert figures.output_tokens == 8 * OUTPUT_TOKENS
        assert low <= figures.per_server.point <= high, (name, figures.per_server.point, bounds[name])
        assert figures.per_node.point == pytest.approx(2 * figures.per_server.point, rel=1e-9), name
        assert figures.cost_per_million.point == pytest.approx(36.0 / 3600 / figures.per_node.point * 1e6, rel=1e-9), name
    # The saving (about 74 %) from the two throughputs: inside what the servers' bounds allow.
    saving = group.comparisons[0].savings[0].percent.point
    assert saving == pytest.approx((1 - measured["base"].per_server.point / measured["spec"].per_server.point) * 100, abs=1e-6)
    assert (1 - bounds["base"][1] / bounds["spec"][0]) * 100 <= saving <= (1 - bounds["base"][0] / bounds["spec"][1]) * 100


def test_cloudwatch_gets_throughput_and_cost_per_variant_and_prompt_class() -> None:
    from specbench.outputs.publish import throughput_datums

    records = [record("base", 100.0, 10.0, 100), record("base", 105.0, 10.0, 200), record("base", 200.0, 5.0, 50, case="poem")]
    records[2].prompt_class = "open-ended"
    datums = throughput_datums(records, _run(36.0))
    by = {(d["MetricName"], tuple((x["Name"], x["Value"]) for x in d["Dimensions"])): d for d in datums}
    structured = (("Variant", "base"), ("PromptClass", "structured"))
    assert by["OutputTokensPerSecondPerNode", structured]["Values"] == [pytest.approx(2 * 300 / 15)]
    assert by["OutputTokensPerSecondPerNode", structured]["Unit"] == "Count/Second"
    assert by["CostPerMillionOutputTokens", structured]["Values"] == [pytest.approx(250.0)]
    assert by["OutputTokensPerSecondPerNode", (("Variant", "base"), ("PromptClass", "open-ended"))]["Values"] == [pytest.approx(20.0)]
    # No price: the throughput is published, the cost is not (absent, never 0).
    names = {d["MetricName"] for d in throughput_datums(records, _run(None))}
    assert names == {"OutputTokensPerSecondPerNode"}


def test_sweep_quotes_cost_and_saving_beside_every_recommendation() -> None:
    import re

    from specbench.analysis.sweep import CONCURRENCY, Load, analyze_sweep
    from tests.sweep_data import Truth, synthetic_points

    truth = Truth({"structured": 0.9, "open-ended": 0.5}, {"Qwen/Qwen3-1.7B": 0.1}, (3, 7), (Load(CONCURRENCY, 1), Load(CONCURRENCY, 4)))
    points = synthetic_points(truth, requests=6)
    priced = analyze_sweep(points, resamples=200, servers_per_node=2, price=cost.NodePrice(36.0, "test"))
    # The saving as in the report: baseline - speculative, its CI in dollars and in percent.
    money, percent = r"[+-]?\$\d+\.\d+", r"[+-]?\d+(\.\d+)?%"
    ci = rf"95% CI {money} to {money}, {percent} to {percent}"
    pattern = rf"\$\d+\.\d\d -> \$\d+\.\d\d per M tokens, saving {money} \({percent}; {ci}\)"
    assert priced.summary and all(re.search(pattern, line) for line in priced.summary), priced.summary
    for cls in priced.classes:
        for rec in cls.recommendations.values():
            assert rec.cost and rec.cost in rec.text
        for lp in cls.load_points:
            # The load table's figures: per node = per server x 2, cost from it at $36/h.
            assert lp.per_node.point == pytest.approx(lp.tokens_per_s_per_node, rel=1e-9)
            assert lp.cost_per_million.point == pytest.approx(cost.cost_per_million_tokens(36.0, lp.per_node.point))
            assert lp.cost_per_million.known
    unpriced = analyze_sweep(points, resamples=200)
    assert not any("per M tokens" in line for line in unpriced.summary)


def test_sweep_goodput_cost_counts_only_tokens_within_the_slos() -> None:
    from specbench.analysis.sweep import CONCURRENCY, Load, Point, Slo, Variant, analyze_sweep

    def point(name: str, k: int | None, tpots: list[float]) -> Point:
        records = []
        for index, tpot in enumerate(tpots):
            r = record(name, 10.0 * index, 0.1 + 99 * tpot, 100)
            r.variant, r.request_index = name, index
            records.append(r)
        return Point(f"{name}-c1", Variant(name, "d" if k else None, k), Load(CONCURRENCY, 1), 0, tuple(records))

    points = [point("baseline", None, [0.02] * 4), point("v", 3, [0.01, 0.01, 0.01, 0.03])]
    analysis = analyze_sweep(points, resamples=100, price=cost.NodePrice(36.0), slo=Slo(tpot_ms=25))
    by = {lp.variant: lp for lp in analysis.classes[0].load_points}
    # v: one request in four misses the TPOT SLO, so a good token costs busy time of all / tokens of three.
    busy = 3 * (0.1 + 99 * 0.01) + (0.1 + 99 * 0.03)
    assert by["v"].goodput_cost_per_million.point == pytest.approx(cost.cost_per_million_tokens(36.0, 300 / busy))
    assert by["v"].cost_per_million.point == pytest.approx(cost.cost_per_million_tokens(36.0, 400 / busy))
    assert by["baseline"].goodput_cost_per_million.point == pytest.approx(by["baseline"].cost_per_million.point)


def test_a_multi_level_run_has_cost_per_load_level() -> None:
    from specbench.outputs.report import cost_headline, decision_table

    records = []
    for level, start, spec_e2e in (("c1", 0.0, 5.0), ("c4", 100.0, 2.5)):
        for variant, e2e in (("base", 10.0), ("spec", spec_e2e)):
            for index in range(2):
                r = record(variant, start + index * e2e, e2e, 101)
                r.load_level, r.request_index = level, index
                records.append(r)
    summary = summarize_run(_run(36.0), records, {}, resamples=100)
    assert summary.levels == ["c1", "c4"]
    group = summary.group("structured")
    assert [t.level for t in group.variants["base"].throughput] == ["c1", "c4"]
    percent = [s.percent.point for s in group.comparisons[0].savings]
    assert percent == [pytest.approx(50.0), pytest.approx(75.0)]
    # A row per level, each with its own costs and saving (positive: the speculative service is cheaper).
    rows = decision_table(summary).rows
    assert [row[2].split(":")[0] for row in rows] == ["c1", "c4"]
    assert all(row[6].startswith("$") and ";" not in row[6] for row in rows) and rows[1][8].startswith("+$")
    assert "structured: at c1 $" in cost_headline(summary) and ", at c4 $" in cost_headline(summary)
    assert "+75%)" in cost_headline(summary)


def test_report_flag_overrides_the_recorded_price_and_says_so(tmp_path, capsys) -> None:
    from specbench import cli
    from tests.test_report import complete_inputs, store_run

    store_run(tmp_path / "results", "run-1", *complete_inputs())
    out = tmp_path / "out"
    # The price is the report's text; the charts are tests/test_report.py's.
    args = ["report", "run-1", "--results", str(tmp_path / "results"), "--out", str(out), "--resamples", "50", "--no-charts"]
    assert cli.main([*args, "--node-price-per-hour", "20", "--servers-per-node", "4"]) == 0
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "$20.00 per node-hour (report --node-price-per-hour)" in html and "Servers per node: 4 (given)" in html
    assert cli.main([*args, "--node-price-per-hour", "0"]) == 0
    assert "not computed (no price)" in (out / "report.html").read_text(encoding="utf-8")
