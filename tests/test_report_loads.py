"""A run at several load levels (issue 33): a verdict per load that says where it changes, the
/metrics acceptance of ``<case>@<level>`` files kept, one sign for the saving (baseline minus
speculative, as run.json defines it) with its CI in dollars and percent, and every load column
saying the load per server and per node."""

from __future__ import annotations

import json
import random
import re

import pytest

from specbench.analysis import aggregate, cost, loads
from specbench.analysis.aggregate import summarize_run
from specbench.analysis.stats import Interval
from specbench.outputs import dashboard, report
from specbench.results.records import RequestRecord
from specbench.results.store import LocalStore, RunStore

BASE, SPEC = "base", "spec"
CASES = {"json": "structured", "poem": "open-ended"}
# Level -> (baseline TPOT s, speculative TPOT s): 1.87x at c1, 0.91x at c8, the figures.
LEVELS = {"c1": (0.020, 0.020 / 1.87), "c8": (0.030, 0.030 / 0.91)}
TOKENS = 100


def level_records(levels=LEVELS, requests: int = 12, cases=CASES) -> list[RequestRecord]:
    """Each case at each level; one request in flight at a time per service (windows back to back)."""
    records = []
    clock = 1.7e9
    for case, prompt_class in cases.items():
        for level, tpots in levels.items():
            for variant, tpot_s in zip((BASE, SPEC), tpots, strict=True):
                rng = random.Random(f"{case}/{level}/{variant}")
                start = clock
                for index in range(requests):
                    tpot = tpot_s * (1 + 0.04 * rng.random())
                    ttft = 2 * tpot  # so the end-to-end speedup is the TPOT one
                    e2e = ttft + (TOKENS - 1) * tpot
                    r = RequestRecord("run-l", variant, case, prompt_class, "native", index, start, load_level=level)
                    r.ttft_s, r.time_per_output_token_s, r.end_to_end_latency_s = ttft, tpot, e2e
                    r.inter_token_latency_s, r.tokens_per_chunk, r.output_tokens, r.output_sha256 = e2e / 40, 2.5, TOKENS, "same"
                    records.append(r)
                    start += e2e
            clock += 1000.0
    return records


def counters(a: float, k: int = 7) -> dict:
    accepted = 100 * sum(a**i for i in range(1, k + 1))
    return {
        "source": "counters",
        "drafts": 100.0,
        "draft_tokens": 100.0 * k,
        "accepted_tokens": accepted,
        "acceptance_rate": accepted / (100.0 * k),
        "mean_acceptance_length": 1 + accepted / 100,
        "per_position": [a**i for i in range(1, k + 1)],
    }


def level_acceptance(levels=LEVELS, cases=CASES) -> dict:
    """As the runner stores a multi-level run: one file per case and level, ``<case>@<level>``."""
    return {
        f"{case}@{level}": {BASE: {"source": "missing", "reason": "no metrics"}, SPEC: counters(0.8)} for case in cases for level in levels
    }


def level_run(levels=LEVELS, price: float | None = 36.0, servers: int = 2, requests: int = 12, cases=CASES) -> dict:
    load = {"model": "m", "max_tokens": TOKENS, "concurrency": 1, "requests": requests}
    deployment = {
        "variants": [{"name": BASE, "draft_model": ""}, {"name": SPEC, "draft_model": "d", "num_speculative_tokens": 7}],
        "cost": {"servers_per_node": servers, "servers_per_node_source": "test"},
    }
    if price is not None:
        deployment["cost"].update(node_price_per_hour=price, price_source="test price")
    return {
        "run_id": "run-l",
        "status": "completed",
        "plan": {
            "engine": "native",
            "load": load,
            "load_levels": [_level_load(load, level) for level in levels],
            "suite": {"name": "s", "test_cases": [{"name": n, "prompt_class": c} for n, c in cases.items()]},
            "endpoints": [{"name": BASE, "url": "http://b"}, {"name": SPEC, "url": "http://s"}],
            "deployment": deployment,
        },
    }


def _level_load(load: dict, level: str) -> dict:
    kind, value = loads.parse_level(level)
    return {**load, "concurrency": int(value)} if kind == "c" else {**load, "request_rate": value}


@pytest.fixture(scope="module")
def summary():
    return summarize_run(level_run(), level_records(), level_acceptance(), resamples=200)


# --- a verdict per load --------------------------------------------------------------------------


def test_the_verdict_is_per_load_and_says_where_it_changes(summary) -> None:
    verdict = summary.verdict
    # The pooled figure (all levels in one) answers no load: it is not the verdict.
    pooled = aggregate.describe_speedup(summary.group("structured").comparisons[0].headline)
    assert pooled not in verdict
    for name in CASES.values():
        found = re.search(rf"{name} at c1 (\d\.\d\d)x \(95% CI [^)]*, faster\), at c8 (\d\.\d\d)x \(95% CI [^)]*, slower\)", verdict)
        assert found, verdict
        assert float(found[1]) == pytest.approx(1.87, abs=0.06) and float(found[2]) == pytest.approx(0.91, abs=0.04)
        assert f"{name} at c1" in verdict and "faster at c1, slower at c8" in verdict
    # The levels are said per server and per node (2 servers per node).
    assert "c1: 1 in flight per server, 2 per node; c8: 8 in flight per server, 16 per node" in verdict


def test_one_outcome_at_every_load_is_said_once() -> None:
    same = {"c2": (0.02, 0.01), "c4": (0.02, 0.011)}
    result = summarize_run(level_run(same), level_records(same, requests=6), level_acceptance(same), resamples=100)
    assert result.verdict.count("faster at every load") == 2, result.verdict


def test_levels_are_in_load_order_whatever_order_they_ran_in() -> None:
    backwards = {"c8": LEVELS["c8"], "c1": LEVELS["c1"]}
    result = summarize_run(level_run(backwards), level_records(backwards, requests=6), level_acceptance(backwards), resamples=100)
    assert result.levels == ["c1", "c8"]
    assert [lc.level for lc in result.group("structured").comparisons[0].levels] == ["c1", "c8"]
    assert "faster at c1, slower at c8" in result.verdict


def test_a_single_level_run_keeps_its_one_verdict() -> None:
    one = {"c4": (0.02, 0.01)}
    run = level_run(one, requests=6)
    del run["plan"]["load_levels"]
    records = level_records(one, requests=6)
    for r in records:
        r.load_level = ""
    acceptance = {case: figures for case, figures in ((k.split("@")[0], v) for k, v in level_acceptance(one).items())}
    result = summarize_run(run, records, acceptance, resamples=100)
    assert result.verdict.startswith("Speculative decoding, end-to-end: structured 2.0") and "per load" not in result.verdict
    assert result.group("structured").comparisons[0].levels == []


def test_decision_table_has_a_row_per_load_with_its_own_answer(summary) -> None:
    table = report.decision_table(summary)
    rows = [dict(zip(table.headers, row, strict=True)) for row in table.rows]
    load = report.LOAD_HEADER
    assert [(r["Prompt class"], r[load]) for r in rows] == [
        (name, level)
        for name in CASES.values()
        for level in ("c1: 1 in flight per server, 2 per node", "c8: 8 in flight per server, 16 per node")
    ]
    assert [r["Faster?"] for r in rows] == ["yes", "no: slower"] * 2
    assert rows[0]["End-to-end speedup"].startswith("1.8") and rows[1]["End-to-end speedup"].startswith("0.9")
    # The cost cells are the row's load only.
    assert all(";" not in r["Cost per M output tokens: baseline"] for r in rows)


def test_the_cost_headline_names_the_load_of_every_figure(summary) -> None:
    text = report.cost_headline(summary)
    for name in CASES.values():
        found = re.search(
            rf"{name}: at c1 \$[\d.]+ → \$[\d.]+ \(saving \+\$[\d.]+, \+\d+%\), at c8 \$[\d.]+ → \$[\d.]+ \(saving -\$[\d.]+, -\d+%\)", text
        )
        assert found, text
    assert "per server" in text and "per node" in text


# --- /metrics acceptance of <case>@<level> files ---------------------------------------------------


def test_the_metrics_acceptance_of_every_level_is_kept(summary) -> None:
    for name in (*CASES, *CASES.values()):
        group = summary.group(name)
        comparison = group.comparisons[0]
        assert comparison.acceptance_source == "metrics", name
        assert group.variants[SPEC].acceptance["source"] == "counters"
        # Pooled over both levels' counters: twice the drafts of one file.
        assert group.variants[SPEC].acceptance["drafts"] == 200.0  # one case per class here
        assert comparison.expected_speedup is not None
    row = dict(zip(*(lambda t: (t.headers, t.rows[0]))(report.decision_table(summary)), strict=True))
    assert row["Acceptance length (source)"].endswith("(/metrics)")


def test_a_case_missing_one_levels_requests_is_partial() -> None:
    records = [r for r in level_records() if not (r.test_case == "json" and r.load_level == "c8")]
    result = summarize_run(level_run(), records, level_acceptance(), resamples=50)
    assert result.completeness == aggregate.PARTIAL
    assert not result.group("json").complete and result.group("poem").complete


# --- one sign for the saving, with its CI in dollars and percent -----------------------------------


def test_describe_saving_is_baseline_minus_speculative_with_both_cis() -> None:
    price = cost.NodePrice(36.0)
    saved = cost.Saving("s", "c1", Interval(2.1, 2.0, 2.2), Interval(51.0, 49.0, 53.0))
    assert cost.describe_saving(saved, price) == "+$2.10 (+51%; 95% CI +$2.00 to +$2.20, +49% to +53%)"
    dearer = cost.Saving("s", "c1", Interval(-0.5, -0.8, -0.2), Interval(-12.4, -20.0, -5.0))
    assert cost.describe_saving(dearer, price) == "-$0.50 (-12%; 95% CI -$0.80 to -$0.20, -20% to -5%)"


def test_a_small_saving_is_told_from_zero() -> None:
    price = cost.NodePrice(36.0)
    small = cost.Saving("s", "c1", Interval(0.00123, 0.00041, 0.0031), Interval(0.21, 0.07, 0.48))
    text = cost.describe_saving(small, price)
    assert text == "+$0.0012 (+0.21%; 95% CI +$0.00041 to +$0.0031, +0.070% to +0.48%)"
    assert cost.describe_saving(cost.Saving("s", "c1", Interval(0.0), Interval(0.0)), price) == "$0.00 (0%)"
    assert cost.signed_amount(-0.0004, "$") == "-$0.00040"


def test_the_sign_is_the_same_in_the_tables_the_headline_and_run_json(summary) -> None:
    # Speculative is cheaper at c1 (positive saving) and dearer at c8 (negative), everywhere.
    savings = summary.group("structured").comparisons[0].savings
    assert savings[0].dollars.point > 0 > savings[1].dollars.point
    assert "positive: the speculative service is cheaper" in cost.FIGURE_DEFINITIONS["cost_saving"]
    decision = report.decision_table(summary)
    column = decision.headers.index(report.SAVING_HEADER)
    assert [row[column][0] for row in decision.rows] == ["+", "-", "+", "-"]
    throughput = report.throughput_table(summary)
    saving_column = throughput.headers.index(report.SAVING_HEADER)
    spec_rows = [row for row in throughput.rows if row[2] == SPEC]
    assert [row[saving_column][0] for row in spec_rows] == ["+", "-"] * 4
    markdown = dashboard.cost_markdown(summary, "structured")
    assert report.SAVING_HEADER.lower() in markdown.lower()
    assert re.search(r"\| \+\$[\d.]+ \(\+\d+%; 95% CI", markdown) and re.search(r"\| -\$[\d.]+ \(-\d+%; 95% CI", markdown)
    assert "(saving +$" in report.cost_headline(summary) and "(saving -$" in report.cost_headline(summary)
    assert "speculative - baseline" not in " ".join(report.how_to_read(summary))


# --- load per server and per node beside every load column ---------------------------------------


def test_describe_level_per_server_and_per_node() -> None:
    assert loads.describe_level("c4", 2) == "c4: 4 in flight per server, 8 per node"
    assert loads.describe_level("r2p5", 4) == "r2p5: 2.5 requests/s per server, 10 per node"
    assert loads.describe_level("c?", 2) == "c?"
    assert loads.in_load_order(["r2", "c8", "r0p5", "c1", "x"]) == ["c1", "c8", "r0p5", "r2", "x"]


def test_every_load_column_says_per_server_and_per_node(summary) -> None:
    throughput = report.throughput_table(summary)
    column = throughput.headers.index(report.LOAD_HEADER)
    assert {row[column] for row in throughput.rows} == {
        "c1: 1 in flight per server, 2 per node",
        "c8: 8 in flight per server, 16 per node",
    }
    markdown = dashboard.cost_markdown(summary, "open-ended")
    assert "| c8: 8 in flight per server, 16 per node |" in markdown
    load_rows = dict(report.load_table(summary).rows)
    assert load_rows["load levels"] == "c1: 1 in flight per server, 2 per node; c8: 8 in flight per server, 16 per node"


def test_the_report_of_a_stored_multi_level_run_reads_per_load(tmp_path) -> None:
    from specbench import cli

    store = RunStore(LocalStore(tmp_path / "results"), "run-l")
    records = level_records(requests=6)
    for case in CASES:
        for level in LEVELS:
            mine = [r for r in records if r.test_case == case and r.load_level == level]
            store.write(f"records/{case}@{level}.jsonl", "".join(r.to_json() + "\n" for r in mine))
    for key, figures in level_acceptance().items():
        store.write(f"acceptance/{key}.json", json.dumps(figures))
    store.write("run.json", json.dumps(level_run(requests=6)))
    out = tmp_path / "out"
    args = ["report", "run-l", "--results", str(tmp_path / "results"), "--out", str(out), "--resamples", "100", "--no-charts"]
    assert cli.main(args) == 0
    text = (out / "report.md").read_text(encoding="utf-8")
    assert "faster at c1, slower at c8" in text and "(/metrics)" in text and "missing" not in text.split("## Latency")[0]


def test_the_dashboard_shows_the_verdict_and_speedups_per_load(summary) -> None:
    settings = dashboard.DashboardSettings("d", "us-east-2", "ns", "cluster", "serving", baseline=BASE)
    table = dashboard.speedup_markdown(summary, settings, {})
    found = re.search(r"\| \*\*structured\*\* at c8: 8 in flight per server, 16 per node \| spec \| (\d\.\d\d)x", table)
    assert found and float(found[1]) < 1, table
    assert re.search(r"\| \*\*structured\*\* at c1: 1 in flight per server, 2 per node \| spec \| 1\.\d\dx", table)
    body = dashboard.to_json(dashboard.body(summary, settings))
    assert "faster at c1, slower at c8" in body and not dashboard.problems("d", dashboard.body(summary, settings))


def test_the_sweep_reports_load_columns_say_per_server_and_per_node() -> None:
    from specbench.analysis.sweep import CONCURRENCY, Load, analyze_sweep
    from specbench.outputs.sweep_report import markdown
    from tests.sweep_data import Truth, synthetic_points

    truth = Truth({"structured": 0.9}, {"Qwen/Qwen3-1.7B": 0.1}, (3,), (Load(CONCURRENCY, 1), Load(CONCURRENCY, 4)))
    analysis = analyze_sweep(synthetic_points(truth, requests=4), resamples=50, servers_per_node=2, price=cost.NodePrice(36.0))
    text = markdown(analysis)
    for level in ("c1: 1 in flight per server, 2 per node", "c4: 4 in flight per server, 8 per node"):
        assert text.count(f"| {level} |") >= 2, text  # the speedup-vs-k table and the load table
    # The recommendation quotes the saving as everywhere: baseline - speculative, CI in dollars and percent.
    assert re.search(r"per M tokens, saving [+-]\$[\d.]+ \([+-][\d.]+%; 95% CI [+-]\$[\d.]+ to [+-]\$[\d.]+, ", text), text


def test_the_speedup_chart_draws_each_load_level(summary) -> None:
    from matplotlib.figure import Figure

    from specbench.outputs.report_charts import speedup_chart

    ax = Figure().add_subplot()
    assert speedup_chart(ax, summary)
    heights = sorted(round(bar.get_height(), 1) for bar in ax.patches)
    groups = len(summary.test_cases) + len(summary.prompt_classes)
    # One bar per group and level: 0.9x at c8 and 1.9x at c1, not the pooled 1.2x.
    assert heights == [0.9] * groups + [1.9] * groups, heights
    labels = [text.get_text() for text in ax.get_legend().get_texts()]
    assert "spec at c1: measured TPOT speedup (95% CI)" in labels and "spec at c8: measured TPOT speedup (95% CI)" in labels


def test_where_it_changes_names_every_stretch_of_loads() -> None:
    said = [("c1", loads.FASTER), ("c2", loads.FASTER), ("c4", loads.UNCLEAR), ("c8", loads.SLOWER), ("c16", loads.FASTER)]
    assert loads.where_it_changes(said) == "faster at c1 and c2, no clear difference at c4, slower at c8, faster at c16"
    assert loads.where_it_changes([("r1", loads.NO_CI), ("r2", loads.NO_CI)]) == "no CI at every load"
    assert loads.outcome(Interval(None)) == loads.NOT_MEASURED and loads.outcome(Interval(1.2)) == loads.NO_CI


def test_a_run_at_one_request_rate_keeps_its_metrics_acceptance() -> None:
    # One --request-rate and no --concurrency: one level, and still files named <case>@r2p5.
    one = {"r2p5": (0.02, 0.01)}
    run = level_run(one, requests=6)
    assert run["plan"]["load_levels"][0]["request_rate"] == 2.5
    result = summarize_run(run, level_records(one, requests=6), level_acceptance(one), resamples=50)
    assert result.levels == ["r2p5"] and result.completeness == aggregate.COMPLETE
    assert all(c.acceptance_source == "metrics" for g in result.prompt_classes for c in g.comparisons)
    assert re.match(r"Speculative decoding, end-to-end: structured [12]\.\d\dx \(95% CI", result.verdict), result.verdict


@pytest.mark.servers
def test_an_emulated_multi_level_run_reports_metrics_acceptance_per_level(tmp_path) -> None:
    """The files as the runner really names them (``<case>@c1``): the report keeps /metrics."""
    from specbench import cli
    from specbench.emulator.server import EmulatorServer, default_profiles
    from specbench.results.runfiles import load_run

    profiles = default_profiles(time_scale=0.1)
    with EmulatorServer(profiles["qwen-vllm"]) as baseline, EmulatorServer(profiles["qwen-sd-vllm"]) as speculative:
        endpoints = ["--endpoint", f"qwen-vllm={baseline.url}", "--endpoint", f"qwen-sd-vllm={speculative.url}"]
        args = ["run", *endpoints, "--results", str(tmp_path), "--output-tokens", "40", "--no-progress", "--ready-timeout", "5"]
        args += ["--test-case", "counting", "--run-id", "ml", "--no-publish", "--requests", "3", "--concurrency", "1", "--concurrency", "2"]
        assert cli.main(args) == 0
    files = load_run(RunStore(LocalStore(tmp_path), "ml"))
    assert sorted(files.acceptance) == ["counting@c1", "counting@c2"]
    summary = summarize_run(files.run, files.records, files.acceptance, resamples=50)
    assert summary.levels == ["c1", "c2"] and summary.completeness == aggregate.COMPLETE
    comparison = summary.group("counting").comparisons[0]
    assert comparison.acceptance_source == "metrics" and [lc.level for lc in comparison.levels] == ["c1", "c2"]
    assert "per load level (c1: 1 in flight per server" in summary.verdict
