"""The dashboard body: layout, content, and CloudWatch's rules (specbench.outputs.dashboard.problems)."""

from __future__ import annotations

import json
import re

import pytest

from specbench.analysis import aggregate
from specbench.outputs import dashboard
from specbench.results import runfiles
from specbench.results.store import LocalStore, RunStore
from tests import runs

SETTINGS = dashboard.DashboardSettings(
    name="SpecDecode-Benchmark",
    region="us-east-2",
    metrics_namespace="Qwen/LLMPerf",
    cluster_name="specdecode-trn2",
    serving_namespace="specdecode",
    lookback_hours=24,
    baseline=runs.BASELINE,
)


def summarize(tmp_path, **run_options) -> aggregate.RunSummary:
    store = RunStore(LocalStore(tmp_path), "run-1")
    runs.write_run(store, **run_options)
    files = runfiles.load_run(store)
    return aggregate.summarize_run(files.run, files.records, files.acceptance, resamples=200)


@pytest.fixture(scope="module")
def complete(tmp_path_factory) -> aggregate.RunSummary:
    return summarize(tmp_path_factory.mktemp("complete"))


def metric_widgets(body: dict, title_start: str) -> list[dict]:
    return [w for w in body["widgets"] if w["type"] == "metric" and w["properties"]["title"].startswith(title_start)]


def test_complete_body_follows_cloudwatch_rules(complete):
    body = dashboard.body(complete, SETTINGS)
    assert dashboard.problems(SETTINGS.name, body) == []
    # header, speedup and percentile tables, per prompt class (2) a cost table and a cost graph, 4 latency
    # bars, TPOT over time, published speedups, 3 acceptance (/metrics rate and length, stream length), errors, 3 Neuron
    assert len(body["widgets"]) == 16 + 2 * 2
    assert body["start"] == "-PT24H"


def test_widgets_tile_the_grid_without_overlap(complete):
    cells = set()
    for widget in dashboard.body(complete, SETTINGS)["widgets"]:
        assert widget["x"] + widget["width"] <= 24
        mine = {(widget["x"] + dx, widget["y"] + dy) for dx in range(widget["width"]) for dy in range(widget["height"])}
        assert not cells & mine, f"{widget['properties'].get('title')} overlaps another widget"
        cells |= mine


@pytest.mark.parametrize("metric", aggregate.LATENCY_METRICS, ids=lambda m: m.name)
def test_latency_bars_put_both_services_side_by_side_per_test_case(complete, metric):
    (widget,) = metric_widgets(dashboard.body(complete, SETTINGS), f"{metric.title}, p50")
    entries = widget["properties"]["metrics"]
    assert widget["properties"]["view"] == "bar" and widget["properties"]["setPeriodToTimeRange"] is True
    expected = [(case.name, variant) for case in runs.CASES for variant in (runs.BASELINE, runs.SPECULATIVE)]
    assert [(e[7], e[3]) for e in entries] == expected
    assert all(e[:3] == ["Qwen/LLMPerf", metric.name, "Variant"] and e[-1]["stat"] == "p50" for e in entries)
    colors = {e[3]: e[-1]["color"] for e in entries}
    assert colors[runs.BASELINE] != colors[runs.SPECULATIVE]


def test_header_and_speedup_table_carry_the_run(complete):
    body = dashboard.body(complete, SETTINGS)
    header, table = (w["properties"]["markdown"] for w in body["widgets"][:2])
    assert complete.verdict in header.replace("\\", "") and "PARTIAL" not in header
    assert "Qwen/Qwen3-1.7B, k=7" in header.replace("\\", "")
    rows = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line][1:]
    # two prompt classes, then four test cases, one speculative service
    assert [row.split(" | ")[0].strip("| *\\") for row in rows][:2] == ["structured", "open-ended"]
    assert len(rows) == 6
    counting = next(row for row in rows if row.startswith("| counting"))
    point = complete.group("counting").comparisons[0].speedups["EndToEndLatency"]
    assert f"{point.point:.2f}x ({point.low:.2f}-{point.high:.2f})" in counting
    assert all(row.count(" | ") == rows[0].count(" | ") for row in rows)


def test_percentile_table_gives_each_service_its_p50_p90_p99_and_failures(tmp_path):
    summary = summarize(tmp_path, errors=1)
    table = dashboard.percentile_markdown(summary)
    rows = [line for line in table.splitlines() if line.startswith("| counting |")]
    assert [row.split(" | ")[1] for row in rows] == [runs.BASELINE, runs.SPECULATIVE]
    spec = summary.group("counting").variants[runs.SPECULATIVE].distributions["TimePerOutputToken"]
    assert f"{spec.p50 * 1000:.1f} / {spec.p90 * 1000:.1f} / {spec.p99 * 1000:.1f}" in rows[1]
    assert rows[0].endswith("| 1/8 (12%) |")  # one injected failure per service and test case
    assert table.count("| **structured** |") == 2


def test_partial_run_is_shown_as_partial(tmp_path):
    summary = summarize(tmp_path, cases=runs.CASES[:2], planned=runs.CASES, status="running")
    body = dashboard.body(summary, SETTINGS)
    assert dashboard.problems(SETTINGS.name, body) == []
    assert "**PARTIAL DATA**" in body["widgets"][0]["properties"]["markdown"]
    assert "no results yet for 2 test case" in body["widgets"][0]["properties"]["markdown"]


def test_no_data_yet(tmp_path):
    body = dashboard.body(None, SETTINGS)
    assert dashboard.problems(SETTINGS.name, body) == []
    assert "No data yet" in body["widgets"][0]["properties"]["markdown"]
    # the header and the Neuron widgets (the cluster is worth watching before any run)
    assert [w["type"] for w in body["widgets"]] == ["text", "metric", "metric", "metric"]


def test_live_figures_fill_the_table_when_no_run_is_stored():
    settings = dashboard.DashboardSettings(
        **{**SETTINGS.__dict__, "discovered_cases": {"counting": "structured"}, "discovered_variants": [runs.SPECULATIVE, runs.BASELINE]}
    )
    live = {
        (runs.BASELINE, "structured", "counting", "EndToEndLatency", "p50"): 27.0,
        (runs.SPECULATIVE, "structured", "counting", "EndToEndLatency", "p50"): 9.0,
    }
    body = dashboard.body(None, settings, live)
    assert dashboard.problems(settings.name, body) == []
    table = body["widgets"][1]["properties"]["markdown"]
    assert "| counting (structured) | qwen-sd-vllm | 3.00x | - |" in table and "no stored run found" in table
    (widget,) = metric_widgets(body, "End-to-end")
    assert [e[3] for e in widget["properties"]["metrics"]] == [runs.BASELINE, runs.SPECULATIVE]


def test_neuron_widgets_search_the_serving_pods_and_the_node(complete):
    widgets = dashboard.neuron_widgets(SETTINGS)
    expressions = [w["properties"]["metrics"][0][0]["expression"] for w in widgets]
    assert all('ClusterName="specdecode-trn2"' in e for e in expressions)
    assert 'Namespace="specdecode"' in expressions[0] and "pod_neuroncore_utilization" in expressions[0]
    assert "pod_neuroncore_memory_usage_tensors" in expressions[1]
    assert "node_neuroncore_utilization" in expressions[2] and "{ContainerInsights,ClusterName,InstanceId,NodeName}" in expressions[2]


def test_body_is_deterministic(tmp_path, complete):
    again = summarize(tmp_path)
    assert dashboard.to_json(dashboard.body(again, SETTINGS)) == dashboard.to_json(dashboard.body(complete, SETTINGS))


def test_markdown_from_data_cannot_break_the_table(tmp_path):
    odd = runs.Case("a|b *c* <d>", "structured", 2.0, 0.8)
    summary = summarize(tmp_path, cases=[odd, runs.CASES[2]])
    table = dashboard.speedup_markdown(summary, SETTINGS, {})
    rows = [line for line in table.splitlines() if line.startswith("| a")]
    assert rows and rows[0].count(" | ") == table.splitlines()[2].count(" | ")
    assert "a\\|b \\*c\\* \\<d\\>" in rows[0]


# --- the rules ----------------------------------------------------------------------------------


def widget(**changes) -> dict:
    return {"type": "text", "x": 0, "y": 0, "width": 6, "height": 3, "properties": {"markdown": "hi"}, **changes}


def metric(entries, **properties) -> dict:
    return widget(type="metric", properties={"region": "us-east-2", "metrics": entries, **properties})


@pytest.mark.parametrize(
    ("name", "body", "expected"),
    [
        ("bad name!", {"widgets": []}, "dashboard name"),
        ("x" * 256, {"widgets": []}, "dashboard name"),
        ("ok", {}, "'widgets' must be a list"),
        ("ok", {"widgets": [widget()] * 501}, "501 widgets"),
        ("ok", {"widgets": [widget(type="chart")]}, "type 'chart'"),
        ("ok", {"widgets": [widget(x=20, width=6)]}, "exceeds the 24-column grid"),
        ("ok", {"widgets": [widget(width=0)]}, "width 0"),
        ("ok", {"widgets": [widget(height=1001)]}, "height 1001"),
        ("ok", {"widgets": [widget(y=-1)]}, "y -1"),
        ("ok", {"widgets": [widget(properties=None)]}, "properties missing"),
        ("ok", {"widgets": [widget(properties={})]}, "text widget without markdown"),
        ("ok", {"widgets": [metric([["ns", "m"]], region="")]}, "without region"),
        ("ok", {"widgets": [metric([])]}, "without metrics"),
        ("ok", {"widgets": [metric([["ns", "m", "Dim"]])]}, "dimension name/value pairs"),
        ("ok", {"widgets": [metric([["ns", "m", {"stat": "p1000"}]])]}, "stat 'p1000'"),
        ("ok", {"widgets": [metric([["ns", "m"]], stat="Median")]}, "stat 'Median'"),
        ("ok", {"widgets": [metric([[{"expression": "SEARCH('x', 'Average', 60)", "id": "Upper"}]])]}, "id starting with a lowercase"),
        ("ok", {"widgets": [metric([["ns", "m"]] * 501)]}, "501 metrics"),
        ("ok", {"widgets": [metric([["ns", "m", *("d", "v") * 31]])]}, "more than 30 dimensions"),
    ],
)
def test_problems_catch_what_cloudwatch_rejects(name, body, expected):
    found = dashboard.problems(name, body)
    assert any(expected in problem for problem in found), found


def test_problems_accept_valid_entries():
    body = {
        "widgets": [
            widget(),
            metric([["ns", "m", "Variant", "v", {"stat": "p99.9", "label": "x"}], [{"expression": "SEARCH('a', 'Sum', 60)", "id": "e1"}]]),
        ]
    }
    assert dashboard.problems("Spec_Decode-1", body) == []


def test_speedup_datums(complete):
    datums = dashboard.speedup_datums(complete, "2026-11-29T10:30:00+00:00")
    names = {d["MetricName"] for d in datums}
    assert names == {"Speedup", "SpeedupLow95", "SpeedupHigh95", "ExpectedSpeedup"}
    expected = [d for d in datums if d["MetricName"] == "ExpectedSpeedup"]
    assert {next(x["Value"] for x in d["Dimensions"] if x["Name"] == "Metric") for d in expected} == {"TimePerOutputToken"}
    # per prompt class (3 dimensions) and per test case (4): 2 + 4 groups, 4 metrics, 3 values + 1 expected each
    assert len(datums) == 6 * (4 * 3 + 1)
    counting = [d for d in datums if {"Name": "TestCase", "Value": "counting"} in d["Dimensions"] and d["MetricName"] == "Speedup"]
    by_metric = {next(x["Value"] for x in d["Dimensions"] if x["Name"] == "Metric"): d["Value"] for d in counting}
    assert by_metric["TimePerOutputToken"] == pytest.approx(complete.group("counting").comparisons[0].speedups["TimePerOutputToken"].point)
    json.dumps(datums, allow_nan=False)


def test_a_cost_widget_per_prompt_class_with_the_price_used(complete):
    body = dashboard.body(complete, SETTINGS)
    tables = [
        w["properties"]["markdown"] for w in body["widgets"] if "Cost per million output tokens:" in w["properties"].get("markdown", "")
    ]
    assert [t.splitlines()[0] for t in tables] == [
        "## Cost per million output tokens: structured prompts",
        "## Cost per million output tokens: open-ended prompts",
    ]
    # This stored run records no price: the cost is not computed, never 0; throughput per node is there.
    assert all("not computed (no price)" in t and "$0" not in t for t in tables)
    assert re.search(r"\| c4: 4 in flight per server, \d+ per node \| qwen-vllm \| \d+\.\d \(\d+\.\d-\d+\.\d\) \|", tables[0])
    graphs = [w for w in body["widgets"] if w["type"] == "metric" and "cost per M output tokens" in w["properties"]["title"]]
    assert len(graphs) == 2
    names = {(e[1], e[5]) for e in graphs[0]["properties"]["metrics"]}
    assert names == {(m, "structured") for m in ("CostPerMillionOutputTokens", "OutputTokensPerSecondPerNode")}
