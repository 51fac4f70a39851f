"""The dashboard body: layout, content, and CloudWatch's rules (specbench.outputs.dashboard.problems)."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone

import pytest

from specbench.analysis import aggregate
from specbench.outputs import dashboard, deployment_state
from specbench.results import runfiles
from specbench.results.store import LocalStore, RunStore
from tests import runs

SETTINGS = runs.dashboard_settings()


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


ROW = 5  # the Deployment state row on top: state table, node-hours and wait graphs, sweep table, pods graph


def run_widgets(body: dict) -> list[dict]:
    """The widgets under the Deployment state row: the run's header first."""
    return body["widgets"][ROW:]


def test_complete_body_follows_cloudwatch_rules(complete):
    body = dashboard.body(complete, SETTINGS)
    assert dashboard.problems(SETTINGS.name, body) == []
    # the deployment row; header, speedup and percentile tables, per prompt class (2) a cost table and a cost
    # graph, 4 latency bars, TPOT over time, published speedups, 3 acceptance (/metrics rate and length, stream
    # length), errors, 3 Neuron
    assert len(body["widgets"]) == ROW + 16 + 2 * 2
    assert body["widgets"][0]["properties"]["markdown"].startswith("## Deployment state") and body["widgets"][0]["y"] == 0
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
    header, table = (w["properties"]["markdown"] for w in run_widgets(body)[:2])
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
    assert "**PARTIAL DATA**" in run_widgets(body)[0]["properties"]["markdown"]
    assert "no results yet for 2 test case" in run_widgets(body)[0]["properties"]["markdown"]


def test_no_data_yet(tmp_path):
    body = dashboard.body(None, SETTINGS)
    assert dashboard.problems(SETTINGS.name, body) == []
    assert "No data yet" in run_widgets(body)[0]["properties"]["markdown"]
    # the deployment row, the header and the Neuron widgets (the cluster is worth watching before any run)
    assert [w["type"] for w in run_widgets(body)] == ["text", "metric", "metric", "metric"]
    assert [w["type"] for w in body["widgets"][:ROW]] == ["text", "metric", "metric", "text", "metric"]


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
    table = run_widgets(body)[1]["properties"]["markdown"]
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


# --- the Deployment state row (specbench/outputs/deployment_state.py) -------------------------------

NOW = datetime(2026, 11, 29, 11, 0, tzinfo=timezone.utc)


def figure(value: float, minutes_ago: float = 1.0) -> deployment_state.Figure:
    return deployment_state.Figure(value, NOW - timedelta(minutes=minutes_ago))


def deployment(**changes) -> deployment_state.Deployment:
    """Four services: ready, waiting (reported a minute ago), failed, and one whose Job stopped reporting."""
    ds = deployment_state
    figures = {
        (ds.SERVICE_STATE, "ready-svc"): figure(ds.READY, 30),
        (ds.SERVICE_WAIT, "ready-svc"): figure(754.0, 30),
        (ds.POD_READY, "ready-svc"): figure(1),
        (ds.POD_RUNNING, "ready-svc"): figure(1),
        (ds.SERVICE_STATE, "compiling-svc"): figure(ds.WAITING),
        (ds.SERVICE_WAIT, "compiling-svc"): figure(2830.0),
        (ds.POD_RUNNING, "compiling-svc"): figure(1),
        (ds.POD_READY, "compiling-svc"): figure(0),
        (ds.SERVICE_STATE, "failed-svc"): figure(ds.FAILED, 120),
        (ds.SERVICE_WAIT, "failed-svc"): figure(3900.0, 120),
        (ds.POD_PENDING, "failed-svc"): figure(1),
        (ds.SERVICE_STATE, "gone-svc"): figure(ds.WAITING, 20),
        (ds.SERVICE_WAIT, "gone-svc"): figure(600.0, 20),
        (ds.NODE_HOURS, ""): figure(12.34, 5),
        (ds.NODES_UP, ""): figure(1, 5),
    }
    values = {"now": NOW, "services": ("ready-svc", "compiling-svc", "failed-svc", "gone-svc", "silent-svc"), "figures": figures}
    return deployment_state.Deployment(**{**values, **changes})


ROW_SETTINGS = runs.dashboard_settings(budget_node_hours=48.0)


def test_the_row_says_each_services_state_with_its_elapsed_time():
    text = deployment_state.services_markdown(deployment(), ROW_SETTINGS).replace("\\", "")
    rows = {line.split(" | ")[0].strip("| "): line for line in text.splitlines() if line.startswith("| ") and "---" not in line}
    assert "**ready** after 12 min (10:30 UTC, 30 min ago)" in rows["ready-svc"] and rows["ready-svc"].endswith(
        "| ready (10:59 UTC, 1 min ago) |"
    )
    assert "**waiting** 47 min: not answering yet (first start or compiling)" in rows["compiling-svc"]
    assert "running, not ready: loading weights or compiling" in rows["compiling-svc"]
    assert "**failed** after 1 h 05 min waiting" in rows["failed-svc"] and "pending: no Neuron node yet" in rows["failed-svc"]
    assert "the Job stopped reporting" in rows["gone-svc"]  # 20 min without a report while waiting
    assert "no report in the window" in rows["silent-svc"] and "no figure (Container Insights" in rows["silent-svc"]
    assert "**Neuron node-hours: 12.3 of 48** (26% of budget.node_hours) · Neuron nodes up: 1" in text
    assert text.startswith("## Deployment state\n\nAs of 2026-11-29 11:00 UTC")


def test_a_waiting_service_is_stale_only_past_three_reports_and_the_reads_period():
    """A figure's time is its period's start: with 15-minute periods (a 360-hour lookback) a report
    5 minutes old is current; with 1-minute periods it means the Job stopped reporting."""
    ds = deployment_state
    figures = {(ds.SERVICE_STATE, "s"): figure(ds.WAITING, 5), (ds.SERVICE_WAIT, "s"): figure(300.0, 5)}
    assert "**waiting** 5 min" in deployment_state.services_markdown(deployment(services=("s",), figures=figures, period_s=900), SETTINGS)
    assert "the Job stopped reporting" in deployment_state.services_markdown(deployment(services=("s",), figures=figures), SETTINGS)


def test_the_row_says_over_budget_no_budget_and_no_figure():
    over = deployment(figures={(deployment_state.NODE_HOURS, ""): figure(50.0)})
    assert "over budget: the cost guard keeps the Neuron node group at 0" in deployment_state.services_markdown(over, ROW_SETTINGS)
    unbudgeted = runs.dashboard_settings(budget_node_hours=0.0)
    assert "(no budget: budget.node_hours = 0)" in deployment_state.services_markdown(over, unbudgeted)
    none = deployment_state.services_markdown(deployment(figures={}), ROW_SETTINGS)
    assert "Neuron node-hours: no figure in the last 24 h" in none
    failed = deployment_state.services_markdown(deployment(error="CloudWatch GetMetricData AccessDenied: no"), ROW_SETTINGS)
    assert "**Not everything could be read:** CloudWatch GetMetricData AccessDenied: no" in failed


def test_the_node_hours_graph_draws_the_budget_and_the_nodes_up():
    graph = deployment_state.node_hours_graph(ROW_SETTINGS)["properties"]
    assert [e[1] for e in graph["metrics"]] == ["NeuronNodeHours", "NeuronNodesUp"]
    assert all(e[2:4] == ["ClusterName", "specdecode-trn2"] for e in graph["metrics"]) and graph["metrics"][1][-1]["yAxis"] == "right"
    assert graph["annotations"] == {"horizontal": [{"value": 48.0, "label": "budget 48 (budget.node_hours)", "color": "#d62728"}]}
    assert deployment_state.node_hours_graph(SETTINGS)["properties"]["annotations"] == {}  # no budget, no line


def test_the_wait_and_pod_graphs_search_what_is_published():
    wait = deployment_state.wait_graph(SETTINGS)["properties"]["metrics"][0][0]["expression"]
    assert wait == """SEARCH('{"Qwen/LLMPerf",Variant} MetricName="ServiceWaitSeconds"', 'Maximum', 60)"""
    pods = deployment_state.pods_graph(SETTINGS)["properties"]["metrics"][0][0]["expression"]
    assert '{ContainerInsights,ClusterName,Namespace,PodName} ClusterName="specdecode-trn2" Namespace="specdecode"' in pods
    assert all(f'MetricName="{m}"' in pods for m in ("pod_status_pending", "pod_status_running", "pod_status_ready"))


def test_the_row_is_on_top_and_follows_cloudwatch_rules(complete):
    body = dashboard.body(complete, ROW_SETTINGS, deployment=deployment())
    assert dashboard.problems(SETTINGS.name, body) == []
    top = body["widgets"][:ROW]
    assert [(w["x"], w["y"], w["width"]) for w in top] == [
        (0, 0, 12),
        (12, 0, 6),
        (18, 0, 6),
        (0, top[0]["height"], 16),
        (16, top[0]["height"], 8),
    ]
    assert run_widgets(body)[0]["y"] == top[0]["height"] + top[3]["height"]  # the run's header right under the row
    assert "**Neuron node-hours: 12.3 of 48**" in top[0]["properties"]["markdown"]


def test_a_rehearsal_row_says_rehearsal():
    rehearsal = runs.dashboard_settings(profile="rehearsal")
    widgets = [w for _, _, w in deployment_state.row(deployment(), rehearsal)]
    titles = [w["properties"].get("title") or w["properties"]["markdown"].splitlines()[0] for w in widgets]
    assert titles[0] == "## REHEARSAL: Deployment state" and titles[3] == "## REHEARSAL: Sweep stages"
    assert all(t.startswith("REHEARSAL: ") for t in (titles[1], titles[2], titles[4]))
    assert not any("REHEARSAL" in str(w) for _, _, w in deployment_state.row(deployment(), SETTINGS))


def test_before_the_first_refresh_the_row_says_it_is_not_read_yet():
    text, sweep = (deployment_state.services_markdown(None, SETTINGS), deployment_state.sweep_markdown(None, SETTINGS))
    assert "Not read yet" in text and "The graphs beside are live" in text and "Not read yet" in sweep


def stage_doc(after: int, proposed: list[str], decided: bool, so_far: float, budget: float = 40.0) -> dict:
    return {
        "after_stage": after,
        "decisions": {"c1": {"made": decided, "best": "Qwen/Qwen3-1.7B k=5", "undecided": [] if decided else ["a", "b"]}},
        "next_stage": {
            "stage": after + 1 if proposed else None,
            "variants": [{"name": p.rsplit("-", 1)[0]} for p in proposed],
            "points": proposed,
        },
        "node_hours": {
            "stage_one": 3.5,
            "next_stage": 2.0 if proposed else 0.0,
            "so_far": so_far,
            "expected": 8.0,
            "worst": 20.0,
            "budget": budget,
        },
    }


def test_sweep_progress_counts_stages_points_decisions_and_node_hours():
    stored = (("baseline-c1", "baseline"), ("q17-k7-c1", "q17-k7"), ("baseline-last-c1", "baseline"))
    points = [deployment_state.PointRun(point, variant, "completed") for point, variant in stored]
    points += [deployment_state.PointRun("q17-k5-c1", "q17-k5", "running")]
    docs = [stage_doc(1, ["q17-k5-c1", "q17-k6-c1"], False, 5.5)]
    progress = deployment_state.sweep_progress("sw", points, docs, (deployment_state.STAGED, 3, 3.5))
    one, two = progress.rows
    assert (one.stage, one.completed, one.planned, one.state, one.node_hours) == (1, 3, 3, "done", 3.5)
    assert one.variants == ("baseline", "q17-k7") and one.decisions == "c1 open (2 not ruled out)"
    assert (two.stage, two.variants, two.completed, two.running, two.planned, two.state, two.node_hours) == (
        2,
        ("q17-k5", "q17-k6"),
        0,
        1,
        2,
        "running",
        2.0,
    )
    assert progress.total == "5.5 node-hours planned so far (plan: expected 8.0, worst case 20.0, sweep budget 40.0)"
    over = deployment_state.sweep_progress("sw", points[:3], [stage_doc(1, ["q17-k5-c1"], False, 45.0)])
    assert over.rows[1].state == "not started: over sweep.budget_node_hours"
    done = deployment_state.sweep_progress("sw", points[:3], [stage_doc(1, [], True, 3.5)])
    assert done.outcome == "every decision is made after stage 1" and done.rows[0].decisions == "c1 decided: Qwen/Qwen3-1.7B k=5"
    grid = deployment_state.sweep_progress("g", points[:2], [], (deployment_state.GRID, 6, 9.0))
    assert (grid.strategy, grid.rows[0].planned, grid.rows[0].state) == ("grid", 6, "partly measured (2 of 6 stored)")


def test_the_sweep_table_and_what_it_says_without_a_sweep():
    progress = deployment_state.sweep_progress(
        "sw", [deployment_state.PointRun("baseline-c1", "baseline", "failed")], [], (deployment_state.STAGED, 4, 3.5)
    )
    text = deployment_state.sweep_markdown(deployment(sweeps=(progress,), sweep_strategy=deployment_state.STAGED), SETTINGS)
    assert "| 1 | baseline | 0 / 4 (1 failed or stopped) | - | 3.5 | partly measured (1 of 4 stored) |" in text.replace("\\", "")
    none = deployment_state.sweep_markdown(deployment(), SETTINGS)
    assert "No sweep configured (`sweep.variants` is empty) and none stored: nothing done, nothing planned." in none
    waiting = deployment_state.sweep_markdown(
        deployment(sweep_strategy=deployment_state.GRID, first_job_points=12, first_job_node_hours=9.25), SETTINGS
    )
    assert "A grid sweep is configured (its first Job: 12 points, 9.2 node-hours planned)" in waiting and "not started" in waiting
