"""The CloudWatch dashboard body: one screen that answers, per prompt type, how much faster
speculative decoding is, how sure we are, and why.

Layout, top to bottom (a 24-column grid):
    deployment    each service's state, node-hours against the budget, the sweep's stages
                  (outputs/deployment_state.py: its table, live graphs beside)
    header        run, what was deployed, status (PARTIAL / no data yet), the one-line verdict
    speedups      table per prompt class and test case: speedups with 95% CIs, acceptance, model
    cost          per prompt class: tokens/s per node and cost per million output tokens (table, graph)
    percentiles   table: p50/p90/p99 of the four latencies per group and service, failed requests
    latencies     per metric, both services side by side per test case (p50 bars, live from CloudWatch)
    over time     time per output token per prompt class and service; published speedups
    acceptance    acceptance rate and mean acceptance length per test case
    errors        failed requests per test case and service
    Neuron        NeuronCore utilization and memory of the serving pods and of the node

Pure functions of a RunSummary (exact statistics from the run's stored records) and of live
CloudWatch figures; ``problems`` checks a body against CloudWatch's rules before it is put.
Standard library only (the aggregation Lambda ships it).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from specbench import jsonfile
from specbench.analysis import aggregate, cost, loads
from specbench.analysis.aggregate import RunSummary, cross_stack_note, rehearsal_note, title_prefix
from specbench.analysis.stats import format_interval
from specbench.outputs import deployment_state

GRID_WIDTH = 24
MAX_WIDGETS = 500
# A guard, not a documented PutDashboard rule (the body reference states only the 500 widgets);
# the graphs here hold 16 metrics at the reference suite's size.
MAX_METRICS_PER_WIDGET = 500
NAME = re.compile(r"^[A-Za-z0-9_-]{1,255}$")
STAT = re.compile(r"^(Average|Sum|SampleCount|Minimum|Maximum|IQM|p\d{1,2}(\.\d+)?|p100|(tm|wm|tc|ts|pr)\d{1,2}(\.\d+)?)$")
EXPRESSION_ID = re.compile(r"^[a-z][A-Za-z0-9_]*$")
WIDGET_TYPES = frozenset({"metric", "text", "log", "alarm", "explorer"})

BASELINE_COLOR = "#7f7f7f"
SPECULATIVE_COLORS = ("#ff7f0e", "#1f77b4", "#2ca02c", "#9467bd", "#d62728")
ACCEPTANCE_WIDGETS = (
    ("AcceptanceRate", "Acceptance rate (accepted / drafted tokens)"),
    ("MeanAcceptanceLength", "Mean acceptance length (tokens per step)"),
    # Published only where the stream passed its self-check: the figure when /metrics has none (Neuron's V0).
    ("StreamAcceptanceLength", "Mean acceptance length from the stream (per request, self-checked)"),
)
# Container Insights (enhanced observability) Neuron metrics; dimension sets as its metric reference lists them.
POD_DIMENSIONS = "{ContainerInsights,ClusterName,Namespace,PodName}"
NODE_DIMENSIONS = "{ContainerInsights,ClusterName,InstanceId,NodeName}"
NEURON_MEMORY_KINDS = ("constants", "model_code", "model_shared_scratchpad", "runtime_memory", "tensors")

# Live figures read back from CloudWatch: (variant, prompt class, test case, metric, stat) -> value.
LiveKey = tuple[str, str, str, str, str]


@dataclass(frozen=True)
class DashboardSettings:
    name: str
    region: str
    metrics_namespace: str
    cluster_name: str
    serving_namespace: str
    lookback_hours: int = 24
    baseline: str = "qwen-vllm"
    # Test cases known from CloudWatch alone (ListMetrics), when no stored run names them: case -> class.
    discovered_cases: Mapping[str, str] = field(default_factory=dict)
    discovered_variants: Sequence[str] = ()
    # The deployment's budget.node_hours (0: none), drawn on the node-hours graph, and env.profile.
    budget_node_hours: float = 0.0
    profile: str = ""


def body(
    summary: RunSummary | None,
    settings: DashboardSettings,
    live: Mapping[LiveKey, float] | None = None,
    hardware_facts: Sequence[Mapping[str, Any]] = (),
    deployment: deployment_state.Deployment | None = None,
) -> dict[str, Any]:
    """The whole dashboard; deterministic for the same inputs (PutDashboard replaces the body).
    ``hardware_facts``: the stored results/hardware-facts/*.json, shown when there are any;
    ``deployment``: what the top row shows (None: not read yet, as in the stack's first body)."""
    live = live or {}
    cases = _cases(summary, settings)
    variants = _variants(summary, settings)
    grid = _Grid()
    for width, height, widget in deployment_state.row(deployment, settings):
        grid.add(width, height, widget)
    grid.add(24, 6, text(header_markdown(summary, settings)))
    if hardware_facts:
        facts_text = hardware_facts_markdown(hardware_facts)
        grid.add(24, 2 + facts_text.count("\n"), text(facts_text))
    if cases and len(variants) > 1:
        table = speedup_markdown(summary, settings, live)
        grid.add(24, 3 + table.count("\n"), text(table))
    for prompt_class in _classes(cases):  # a widget per prompt class: cost and throughput per node
        table = cost_markdown(summary, prompt_class)
        grid.add(12, 3 + table.count("\n"), text(table))
        grid.add(12, max(6, 3 + table.count("\n")), cost_graph(prompt_class, variants, settings))
    if summary is not None and summary.test_cases:
        table = percentile_markdown(summary)
        grid.add(24, 3 + table.count("\n"), text(table))
    if cases:
        for metric in aggregate.LATENCY_METRICS:
            grid.add(12, 7, latency_bars(metric, cases, variants, settings))
        grid.add(12, 7, tpot_over_time(cases, variants, settings))
        speculative = [v for v in variants if v != settings.baseline]
        only_baseline = f"only the baseline ({settings.baseline}) has results in this run: no speculative service to compare"
        grid.add(12, 7, or_text(published_speedups(cases, variants, settings), only_baseline))
        if speculative:
            for metric, title in ACCEPTANCE_WIDGETS:
                grid.add(12, 6, acceptance_bars(metric, title, cases, speculative, settings))
        else:
            grid.add(24, 2, text(f"**Draft acceptance:** nothing to show: {_md(only_baseline)}."))
        grid.add(24, 6, error_bars(cases, variants, settings))
    grid.widgets = [or_text(widget, "no series for this run") for widget in grid.widgets]
    for widget in neuron_widgets(settings):
        grid.add(8, 6, widget)
    return {"start": f"-PT{settings.lookback_hours}H", "periodOverride": "inherit", "widgets": grid.widgets}


def to_json(dashboard: Mapping[str, Any]) -> str:
    return jsonfile.dumps(dashboard, separators=(",", ":"), sort_keys=True)


# --- markdown ------------------------------------------------------------------------------------


HARDWARE_FACTS_PREFIX = "hardware-facts/"  # under the results prefix (charts/hardware_facts.py)


def hardware_facts_markdown(facts: Sequence[Mapping[str, Any]]) -> str:
    """One line per Neuron node the hardware-facts Job saw, its verdict, and each contradicting or
    unread fact (the Job's own verdict, specbench/hardware/facts.py)."""
    lines = ["### Hardware facts (first start)"]
    for f in sorted(facts, key=lambda f: str(f.get("node"))):
        if "problems" not in f:
            lines.append(f"- {_md(str(f.get('node', '?')))}: {_md(str(f.get('error', 'not a facts file')))}")
            continue
        dev = f.get("dev_neuron") or {}
        header = f.get("neuron_ls_header") or {}
        verdict = "**contradicts the project's assumptions: sweeps stop**" if f["problems"] else "as assumed"
        lines.append(
            f"- `{_md(str(f.get('node')))}` ({verdict}): {f.get('node_devices', '?')} devices, "
            f"LNC {_md(str(header.get('logical-neuroncore-config', '?')))}, driver {_md(str(f.get('driver_version') or '?'))}, "
            f"runtime {_md(str(f.get('runtime_version') or '?'))}; {len(dev.get('visible', []))} of {f.get('requested_devices', '?')} "
            f"devices visible in the {_md(str(f.get('layout', '?')))} layout"
        )
        lines += [f"  - {_md(str(p))}" for p in f["problems"]]
        lines += [f"  - unknown: {_md(str(u))}" for u in f.get("unknown", [])]
    return "\n".join(lines)


def header_markdown(summary: RunSummary | None, settings: DashboardSettings) -> str:
    lines = [f"# Speculative decoding on Trainium2: {settings.name}"]
    if summary is None or summary.completeness == aggregate.NO_DATA:
        lines += [
            "**No data yet.** No benchmark run with stored results was found in the results prefix.",
            f"Start one with `kubectl -n {settings.serving_namespace} create job specbench-rerun-$(date +%s) "
            "--from=cronjob/specbench`; this dashboard is rebuilt when its results land.",
        ]
        if summary is not None:
            lines.append(f"Run `{summary.run_id}`: status {summary.status}.")
            lines += [_md(note) for note in summary.notes if note.startswith("data quality:")]
        return "\n\n".join(lines)
    banner = "" if summary.completeness == aggregate.COMPLETE else "**PARTIAL DATA** — "
    lines.append(f"{banner}**{_md(summary.verdict)}**")
    for name, why in summary.missing_services.items():
        lines.append(f"**No usable result from {_md(name)}:** {_md(why)}")
    if cross_stack_note(summary.settings):
        lines.append(f"**{_md(cross_stack_note(summary.settings))}**")
    if rehearsal_note(summary.settings):
        lines[0] = f"# {_md(title_prefix(summary.settings))}{lines[0][2:]}"
        lines.insert(1, f"**{_md(rehearsal_note(summary.settings))}**")
    serving = summary.settings.get("serving", {})
    drafts = [
        f"{_md(v.get('name', ''))}: {_md(v.get('method') or 'draft')} {_md(v.get('draft_model') or '-')}, "
        f"k={v.get('num_speculative_tokens') or '-'}" + (f" on {_md(v['stack'])}" if v.get("stack") else "")
        for v in summary.settings.get("variants", [])
        if isinstance(v, dict) and v.get("draft_model")
    ]
    p = summary.parameters
    lines.append(
        " · ".join(
            part
            for part in (
                f"Run `{_md(summary.run_id)}` ({summary.status}, {summary.started or '?'} to {summary.finished or '?'})",
                f"target {_md(serving.get('target_model', p.get('model', '?')))}",
                f"TP {serving.get('tensor_parallel_size', '?')}, max-num-seqs {serving.get('max_num_seqs', '?')}, "
                f"max-model-len {serving.get('max_model_len', '?')}",
                *drafts,
            )
            if part
        )
    )
    lines.append(
        f"Load: {p.get('input_tokens', '?')} tokens in, {p.get('max_tokens', '?')} out, {p.get('concurrency', '?')} in flight, "
        f"{p.get('requests', '?')} requests per test case and service, temperature {p.get('temperature', '?')}, "
        f"engine {p.get('engine', '?')}. Baseline: {_md(summary.baseline)}. "
        f"Graphs: last {settings.lookback_hours} h of CloudWatch data; tables: the run's stored records."
    )
    if summary.notes:
        lines.append("Notes: " + "; ".join(_md(note) for note in summary.notes[:6]) + (" …" if len(summary.notes) > 6 else ""))
    return "\n\n".join(lines)


def _acceptance_cell(metrics_rate: float | None, source: str, stream: Mapping[str, Any]) -> str:
    """The acceptance rate from /metrics; else the stream's, marked so; else why there is none."""
    if metrics_rate is not None:
        return f"{metrics_rate:.1%}"
    if source == "stream" and stream.get("acceptance_rate") is not None:
        return f"{stream['acceptance_rate']:.1%} (stream)"
    if stream and not stream.get("reliable"):
        return "- (stream unreliable)"
    return "-"


def speedup_markdown(summary: RunSummary | None, settings: DashboardSettings, live: Mapping[LiveKey, float]) -> str:
    """Speedup table: exact (stored records, bootstrap CI) where the run has them, else live p50s."""
    head = (
        "| group | service | end-to-end | time per output token | inter-token (per chunk) | TTFT | acceptance | a | "
        "expected (model) | short of model | errors |\n|---|---|---|---|---|---|---|---|---|---|---|"
    )
    rows = []
    if summary is not None and summary.completeness != aggregate.NO_DATA:
        for group in (*summary.prompt_classes, *summary.test_cases):
            label = f"**{_md(group.name)}**" if group.kind == "prompt class" else f"{_md(group.name)} ({_md(group.prompt_class)})"
            partial = "" if group.complete else " (partial)"
            for comparison in group.comparisons:
                spec = group.variants[comparison.variant]
                base = group.variants[summary.baseline]
                rate = (spec.acceptance or {}).get("acceptance_rate")
                stream = spec.stream_acceptance or {}
                rows.append(
                    "| "
                    + " | ".join(
                        (
                            label + partial,
                            _md(comparison.variant),
                            *(format_interval(comparison.speedups[m]) for m in aggregate.SPEEDUP_ORDER),
                            _acceptance_cell(rate, comparison.acceptance_source, stream),
                            "-" if comparison.acceptance.a is None else f"{comparison.acceptance.a:.2f}",
                            "-" if comparison.expected_speedup is None else f"{comparison.expected_speedup:.2f}x",
                            {True: "**yes**", False: "no", None: "-"}[comparison.shortfall],
                            f"{base.errors + spec.errors}/{base.requests + spec.requests}",
                        )
                    )
                    + " |"
                )
                if group.kind == "prompt class":
                    rows.extend(_level_rows(group, comparison, summary.servers_per_node))
        pooled = (
            " A run at several load levels: a prompt class's first row pools the levels, the rows under it are each level "
            "(the answer can change with the load)."
            if len(summary.levels) > 1
            else ""
        )
        note = (
            f"Speedup = baseline median / speculative median, 95% bootstrap CI in parentheses.{pooled} Acceptance = vLLM's "
            "accepted/drafted tokens from /metrics, else measured from the stream where marked (stream); a = per-token acceptance; "
            f"expected = E/(k·c+1) with c = {summary.draft_cost_ratio}; short of model = the whole CI of the time-per-output-token "
            "speedup lies below it."
        )
    else:
        for case, prompt_class in sorted(_cases(summary, settings).items()):
            for variant in settings.discovered_variants:
                if variant == settings.baseline:
                    continue
                cells = [_live_speedup(live, settings.baseline, variant, prompt_class, case, m) for m in aggregate.SPEEDUP_ORDER]
                rows.append(f"| {_md(case)} ({_md(prompt_class)}) | {_md(variant)} | " + " | ".join(cells) + " | - | - | - | - | - |")
        note = f"Live: ratio of CloudWatch p50s over the last {settings.lookback_hours} h (no stored run found: no confidence intervals)."
    return "## Speedup of speculative decoding\n\n" + head + "\n" + "\n".join(rows) + "\n\n" + note


def _level_rows(group: aggregate.Group, comparison: aggregate.Comparison, servers_per_node: int) -> list[str]:
    """A prompt class's speedups at each load level of a run at several (the load per server and per node)."""
    rows = []
    for lc in comparison.levels:
        load = _md(loads.describe_level(lc.level, servers_per_node))
        speedups = " | ".join(format_interval(lc.speedups[m]) for m in aggregate.SPEEDUP_ORDER)
        cells = (f"**{_md(group.name)}** at {load}", _md(comparison.variant), speedups, "-", "-", "-", "-", f"{sum(lc.requests)} requests")
        rows.append("| " + " | ".join(cells) + " |")
    return rows


def cost_markdown(summary: RunSummary | None, prompt_class: str) -> str:
    """One prompt class: per load level and service, output tokens per second per node while busy and
    the cost of a million output tokens with 95% CIs, the change against the baseline, and the price
    used with where it came from."""
    title = f"## Cost per million output tokens: {_md(prompt_class)} prompts"
    group = next((g for g in summary.prompt_classes if g.name == prompt_class), None) if summary else None
    if summary is None or group is None:
        return title + "\n\nNo stored run has this class: the graph beside shows what CloudWatch has."
    columns = ("load (per server, per node)", "service", "tokens/s per node", "cost per M tokens", cost.SAVING_HEADER)
    head = "| " + " | ".join(columns) + " |\n|---|---|---|---|---|"
    savings = {(s.variant, s.level): s for c in group.comparisons for s in c.savings if s}
    rows = []
    for variant in group.variants.values():
        for t in variant.throughput:
            change = (
                cost.describe_saving(savings.get((variant.variant, t.level)), summary.price) if variant.variant != summary.baseline else "-"
            )
            rows.append(
                f"| {_md(loads.describe_level(t.level, summary.servers_per_node))} | {_md(variant.variant)} | "
                f"{format_interval(t.per_node, unit='', digits=1)} | "
                f"{_md(cost.describe_cost(t.cost_per_million, summary.price))} | {_md(change)} |"
            )
    note = (
        f"Price: {_md(summary.price.describe())}; {summary.servers_per_node} servers per node. Busy = at least one request in "
        "flight (the union of request windows); cost = price / 3600 / tokens per second per node x 1e6."
    )
    return title + "\n\n" + head + "\n" + "\n".join(rows) + "\n\n" + note


def cost_graph(prompt_class: str, variants: Sequence[str], s: DashboardSettings) -> dict[str, Any]:
    """The published CostPerMillionOutputTokens (left axis) and OutputTokensPerSecondPerNode (right) per service."""
    metrics = []
    for variant in variants:
        color = _color(variant, variants, s.baseline)
        metrics.append(
            _entry(s, "CostPerMillionOutputTokens", variant, prompt_class, stat="Average", label=f"{variant}: $ per M", color=color)
        )
        metrics.append(
            _entry(
                s,
                "OutputTokensPerSecondPerNode",
                variant,
                prompt_class,
                stat="Average",
                label=f"{variant}: tokens/s/node",
                color=color,
                yAxis="right",
            )
        )
    title = f"{prompt_class}: cost per M output tokens (USD) and tokens/s per node"
    return _metric_widget(title, metrics, s, view="bar", setPeriodToTimeRange=True, period=60)


def _classes(cases: Mapping[str, str]) -> list[str]:
    return list(dict.fromkeys(cases.values()))


def percentile_markdown(summary: RunSummary) -> str:
    """p50/p90/p99 of the four latencies per prompt class and test case and service, with error rates."""
    units = {"EndToEndLatency": ("s", 1.0, 2), "TimePerOutputToken": ("ms", 1000.0, 1), "InterTokenLatency": ("ms", 1000.0, 1)}
    columns = [(m, *units.get(m, ("ms", 1000.0, 0))) for m in aggregate.SPEEDUP_ORDER]
    head = "| group | service | " + " | ".join(f"{_md(m)} p50 / p90 / p99 ({unit})" for m, unit, _, _ in columns) + " | failed |"
    rows = [head, "|---|---|" + "---|" * (len(columns) + 1)]
    for group in (*summary.prompt_classes, *summary.test_cases):
        label = f"**{_md(group.name)}**" if group.kind == "prompt class" else _md(group.name)
        for variant in group.variants.values():
            cells = []
            for metric, _, scale, digits in columns:
                d = variant.distributions[metric]
                figures = (d.p50, d.p90, d.p99)
                cells.append("-" if d.count == 0 else " / ".join(f"{value * scale:.{digits}f}" for value in figures if value is not None))
            rate = variant.error_rate
            failed = f"{variant.errors}/{variant.requests}" + ("" if rate is None else f" ({rate:.0%})")
            rows.append(f"| {label} | {_md(variant.variant)} | " + " | ".join(cells) + f" | {failed} |")
    note = "Successful requests' latencies from the run's stored records; percentiles by linear interpolation."
    return "## Latency percentiles\n\n" + "\n".join(rows) + "\n\n" + note


def _live_speedup(live: Mapping[LiveKey, float], baseline: str, variant: str, prompt_class: str, case: str, metric: str) -> str:
    base = live.get((baseline, prompt_class, case, metric, "p50"))
    spec = live.get((variant, prompt_class, case, metric, "p50"))
    return f"{base / spec:.2f}x" if base and spec else "-"


def _md(text: Any) -> str:
    """Markdown-safe text: table pipes and emphasis characters escaped, one line."""
    return re.sub(r"([|*_`\[\]<>\\])", r"\\\1", str(text)).replace("\n", " ")


# --- metric widgets ------------------------------------------------------------------------------


def text(markdown: str) -> dict[str, Any]:
    return {"type": "text", "properties": {"markdown": markdown}}


def or_text(widget: dict[str, Any], why: str) -> dict[str, Any]:
    """The widget, or, when it is a metric widget with no metric (CloudWatch refuses those), a text
    widget in its place that says what is missing; position and size are kept."""
    properties = widget.get("properties") or {}
    if widget.get("type") != "metric" or properties.get("metrics"):
        return widget
    placed = {key: widget[key] for key in ("x", "y", "width", "height") if key in widget}
    return {**text(f"**{_md(properties.get('title', 'Graph'))}:** nothing to show: {_md(why)}."), **placed}


def fallback_body(summary: RunSummary | None, settings: DashboardSettings, found: Sequence[str]) -> dict[str, Any]:
    """A body that always passes ``problems``: the header and what kept the full dashboard from being put."""
    try:
        header = header_markdown(summary, settings)
    except Exception as error:  # noqa: BLE001 - the fallback must not fail on the content it reports
        header = f"# Speculative decoding on Trainium2\n\nThe run could not be described: {_md(type(error).__name__)}"
    shown = "\n".join(f"- {_md(problem)[:300]}" for problem in list(found)[:10])
    grid = _Grid()
    grid.add(24, 6, text(header))
    grid.add(24, 4 + min(len(found), 10), text("## Dashboard reduced to text\n\nThe full dashboard could not be built:\n\n" + shown))
    return {"start": f"-PT{settings.lookback_hours}H", "periodOverride": "inherit", "widgets": grid.widgets}


def _metric_widget(title: str, metrics: list[list[Any]], settings: DashboardSettings, **properties: Any) -> dict[str, Any]:
    return {
        "type": "metric",
        "properties": {"title": title, "region": settings.region, "metrics": metrics, "stacked": False, **properties},
    }


def _color(variant: str, variants: Sequence[str], baseline: str) -> str:
    if variant == baseline:
        return BASELINE_COLOR
    speculative = [v for v in variants if v != baseline]
    return SPECULATIVE_COLORS[speculative.index(variant) % len(SPECULATIVE_COLORS)]


def _entry(s: DashboardSettings, metric: str, variant: str, prompt_class: str, case: str = "", **options: Any) -> list[Any]:
    """One metric of a widget: [namespace, name, dimension pairs..., options], under the dimension set
    the benchmark publishes ({Variant, PromptClass} or {Variant, PromptClass, TestCase})."""
    dimensions = ["Variant", variant, "PromptClass", prompt_class] + (["TestCase", case] if case else [])
    return [s.metrics_namespace, metric, *dimensions, options]


def latency_bars(
    metric: aggregate.LatencyMetric, cases: Mapping[str, str], variants: Sequence[str], s: DashboardSettings
) -> dict[str, Any]:
    """p50 of a latency per test case, the services' bars next to each other (the reference figures)."""
    metrics = [
        _entry(
            s,
            metric.name,
            variant,
            prompt_class,
            case,
            stat="p50",
            label=f"{case} · {variant}",
            color=_color(variant, variants, s.baseline),
        )
        for case, prompt_class in cases.items()
        for variant in variants
    ]
    return _metric_widget(f"{metric.title}, p50 (s)", metrics, s, view="bar", setPeriodToTimeRange=True, period=60)


def tpot_over_time(cases: Mapping[str, str], variants: Sequence[str], s: DashboardSettings) -> dict[str, Any]:
    metrics = [
        _entry(
            s,
            "TimePerOutputToken",
            variant,
            prompt_class,
            stat="p50",
            label=f"{prompt_class} · {variant}",
            color=_color(variant, variants, s.baseline),
        )
        for prompt_class in dict.fromkeys(cases.values())
        for variant in variants
    ]
    return _metric_widget("Time per output token over time, p50 per prompt class (s)", metrics, s, view="timeSeries", period=300)


def published_speedups(cases: Mapping[str, str], variants: Sequence[str], s: DashboardSettings) -> dict[str, Any]:
    """The speedups the aggregation publishes (metric Speedup), per prompt class: their history across runs."""
    metrics = [
        [
            *_entry(s, "Speedup", variant, prompt_class)[:-1],
            "Metric",
            metric,
            {"stat": "Average", "label": f"{prompt_class} · {variant} · {metric}"},
        ]
        for prompt_class in dict.fromkeys(cases.values())
        for variant in variants
        if variant != s.baseline
        for metric in (aggregate.HEADLINE_METRIC, aggregate.MODEL_METRIC)
    ]
    return _metric_widget(
        "Speedup per run (baseline median / speculative median)",
        metrics,
        s,
        view="timeSeries",
        period=3600,
        annotations={"horizontal": [{"value": 1, "label": "no speedup"}]},
    )


def acceptance_bars(metric: str, title: str, cases: Mapping[str, str], speculative: Sequence[str], s: DashboardSettings) -> dict[str, Any]:
    metrics = [
        _entry(s, metric, variant, prompt_class, case, label=f"{case} · {variant}")
        for case, prompt_class in cases.items()
        for variant in speculative
    ]
    return _metric_widget(title, metrics, s, view="bar", stat="Average", setPeriodToTimeRange=True, period=60)


def error_bars(cases: Mapping[str, str], variants: Sequence[str], s: DashboardSettings) -> dict[str, Any]:
    """Failed requests (Errors is 1 per failed request, 0 per good one: Sum counts failures)."""
    metrics = [
        _entry(s, "Errors", variant, prompt_class, case, label=f"{case} · {variant}", color=_color(variant, variants, s.baseline))
        for case, prompt_class in cases.items()
        for variant in variants
    ]
    return _metric_widget("Failed requests", metrics, s, view="bar", stat="Sum", setPeriodToTimeRange=True, period=60)


def neuron_widgets(s: DashboardSettings) -> list[dict[str, Any]]:
    """Container Insights Neuron metrics of the serving pods and the node, found with SEARCH so new
    pods (a restart renames them) appear without rebuilding the dashboard."""
    pods = f'{POD_DIMENSIONS} ClusterName="{s.cluster_name}" Namespace="{s.serving_namespace}"'
    node = f'{NODE_DIMENSIONS} ClusterName="{s.cluster_name}"'
    memory = " OR ".join(f'MetricName="pod_neuroncore_memory_usage_{kind}"' for kind in NEURON_MEMORY_KINDS)
    return [
        _metric_widget(
            "NeuronCore utilization of the serving pods (%)",
            [[{"expression": f"SEARCH('{pods} MetricName=\"pod_neuroncore_utilization\"', 'Average', 60)", "id": "pods", "label": ""}]],
            s,
            view="timeSeries",
            period=60,
        ),
        _metric_widget(
            "NeuronCore memory of the serving pods (bytes)",
            [[{"expression": f"SEARCH('{pods} ({memory})', 'Average', 60)", "id": "memory", "label": ""}]],
            s,
            view="timeSeries",
            period=60,
        ),
        _metric_widget(
            "NeuronCore utilization of the Trainium node (%)",
            [[{"expression": f"SEARCH('{node} MetricName=\"node_neuroncore_utilization\"', 'Average', 60)", "id": "node", "label": ""}]],
            s,
            view="timeSeries",
            period=60,
        ),
    ]


# --- the speedups as metrics ---------------------------------------------------------------------


def speedup_datums(summary: RunSummary, timestamp: Any) -> list[dict[str, Any]]:
    """PutMetricData datums of every speedup with a point estimate: Speedup, its CI bounds, and the
    model's expected speedup, per (speculative variant, prompt class[, test case], metric)."""
    datums = []
    for group in (*summary.prompt_classes, *summary.test_cases):
        for comparison in group.comparisons:
            base = [("Variant", comparison.variant), ("PromptClass", group.prompt_class)]
            if group.kind == "test case":
                base.append(("TestCase", group.name))
            for metric, interval in comparison.speedups.items():
                values = {"Speedup": interval.point, "SpeedupLow95": interval.low, "SpeedupHigh95": interval.high}
                if metric == aggregate.MODEL_METRIC:
                    values["ExpectedSpeedup"] = comparison.expected_speedup
                dimensions = [{"Name": name, "Value": value} for name, value in (*base, ("Metric", metric))]
                datums += [
                    {"MetricName": name, "Dimensions": dimensions, "Timestamp": timestamp, "Value": float(value), "Unit": "None"}
                    for name, value in values.items()
                    # PutMetricData rejects NaN and infinities; a speedup is a ratio of positive medians.
                    if isinstance(value, (int, float)) and math.isfinite(value) and value > 0
                ]
    return datums


# --- layout and checks ---------------------------------------------------------------------------


class _Grid:
    """Places widgets left to right, wrapping at 24 columns; a row is as tall as its tallest widget."""

    def __init__(self) -> None:
        self.widgets: list[dict[str, Any]] = []
        self.x = self.y = self.row_height = 0

    def add(self, width: int, height: int, widget: dict[str, Any]) -> None:
        if self.x + width > GRID_WIDTH:
            self.x, self.y, self.row_height = 0, self.y + self.row_height, 0
        self.widgets.append({**widget, "x": self.x, "y": self.y, "width": width, "height": height})
        self.x += width
        self.row_height = max(self.row_height, height)


def problems(name: str, dashboard: Mapping[str, Any]) -> list[str]:
    """What CloudWatch would reject (PutDashboard's documented rules for name, widgets, metrics);
    an empty list means the body may be put."""
    found = []
    if not NAME.match(name):
        found.append(f"dashboard name {name!r}: 1-255 of A-Z a-z 0-9 - _")
    widgets = dashboard.get("widgets")
    if not isinstance(widgets, list):
        return [*found, "body: 'widgets' must be a list"]
    if len(widgets) > MAX_WIDGETS:
        found.append(f"{len(widgets)} widgets: at most {MAX_WIDGETS}")
    for index, widget in enumerate(widgets):
        found += [f"widget {index}: {problem}" for problem in _widget_problems(widget)]
    return found


def _widget_problems(widget: Mapping[str, Any]) -> list[str]:
    found = []
    if widget.get("type") not in WIDGET_TYPES:
        found.append(f"type {widget.get('type')!r} not one of {', '.join(sorted(WIDGET_TYPES))}")
    for key, low, high in (("x", 0, GRID_WIDTH - 1), ("y", 0, None), ("width", 1, GRID_WIDTH), ("height", 1, 1000)):
        value = widget.get(key)
        if not isinstance(value, int) or value < low or (high is not None and value > high):
            found.append(f"{key} {value!r} outside {low}..{high if high is not None else 'any'}")
    if isinstance(widget.get("x"), int) and isinstance(widget.get("width"), int) and widget["x"] + widget["width"] > GRID_WIDTH:
        found.append(f"x + width = {widget['x'] + widget['width']} exceeds the {GRID_WIDTH}-column grid")
    properties = widget.get("properties")
    if not isinstance(properties, dict):
        return [*found, "properties missing"]
    if widget.get("type") == "text" and not isinstance(properties.get("markdown"), str):
        found.append("text widget without markdown")
    if widget.get("type") == "metric":
        found += _metric_problems(properties)
    return found


def _metric_problems(properties: Mapping[str, Any]) -> list[str]:
    found = []
    if not properties.get("region"):
        found.append("metric widget without region")
    metrics = properties.get("metrics")
    if not isinstance(metrics, list) or not metrics:
        return [*found, "metric widget without metrics"]
    if len(metrics) > MAX_METRICS_PER_WIDGET:
        found.append(f"{len(metrics)} metrics: at most {MAX_METRICS_PER_WIDGET} per widget")
    if "stat" in properties and not STAT.match(str(properties["stat"])):
        found.append(f"stat {properties['stat']!r} is not a CloudWatch statistic")
    for entry in metrics:
        if not isinstance(entry, list) or not entry:
            found.append(f"metric entry {entry!r} is not a non-empty array")
            continue
        options = entry[-1] if isinstance(entry[-1], dict) else None
        names = entry[:-1] if options is not None else entry
        if not names:  # an expression entry: [{"expression": ..., "id": ...}]
            if not options or not isinstance(options.get("expression"), str) or not EXPRESSION_ID.match(str(options.get("id"))):
                found.append(f"expression entry {entry!r} needs an expression and an id starting with a lowercase letter")
            continue
        if not all(isinstance(n, str) and n for n in names) or len(names) < 2 or len(names) % 2:
            found.append(f"metric entry {names!r}: namespace, metric name, then dimension name/value pairs")
        elif len(names) // 2 - 1 > 30:
            found.append(f"metric entry {names[:2]!r}: more than 30 dimensions")
        if options and "stat" in options and not STAT.match(str(options["stat"])):
            found.append(f"stat {options['stat']!r} is not a CloudWatch statistic")
    return found


# --- inputs --------------------------------------------------------------------------------------


def _cases(summary: RunSummary | None, settings: DashboardSettings) -> dict[str, str]:
    """Test case -> prompt class, in the run's order (or CloudWatch's, when there is no stored run)."""
    if summary is not None and summary.test_cases:
        return {group.name: group.prompt_class for group in summary.test_cases}
    return dict(settings.discovered_cases)


def _variants(summary: RunSummary | None, settings: DashboardSettings) -> list[str]:
    if summary is not None and summary.test_cases:
        return [summary.baseline, *summary.speculative]
    found = list(settings.discovered_variants)
    return ([settings.baseline] if settings.baseline in found else []) + [v for v in found if v != settings.baseline]
