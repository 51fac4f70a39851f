"""A stored run's summary (specbench.analysis.aggregate.RunSummary) as a report a person reads: a
self-contained ``report.html`` (charts embedded, no external resources), the same in
``report.md`` next to the chart PNGs, written by ``specbench report``.

The tables are pure functions of the summary (``speedup_table``, ``latency_table``,
``deployment_table``, ``load_table``); the charts (specbench.outputs.report_charts) need matplotlib, which
is imported only when charts are drawn (``pip install -r specbench/requirements-report.txt``).
"""

from __future__ import annotations

import base64
import html
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specbench.analysis.aggregate import (
    COMPLETE,
    HEADLINE_METRIC,
    LATENCY_METRICS,
    MODEL_METRIC,
    NO_DATA,
    SPEEDUP_ORDER,
    Comparison,
    Group,
    RunSummary,
    VariantStats,
    cross_stack_note,
    rehearsal_note,
    title_prefix,
)
from specbench.analysis.cost import BUSY_DEFINITION, NO_PRICE, SAVING_HEADER, describe_cost, describe_saving, signed_amount
from specbench.analysis.loads import describe_level
from specbench.analysis.stats import Interval, format_interval
from specbench.outputs.report_names import ACCEPTANCE_CHART, METRIC_DISPLAY, SPEEDUP_CHART, STREAM_HISTOGRAM_CHART, latency_chart_name


def chart_titles() -> dict[str, str]:
    """Chart name (its PNG is ``<name>.png``) -> caption, in the report's order."""
    titles = {SPEEDUP_CHART: "Time-per-output-token speedup: measured (95% CI) against the model's expectation"}
    titles.update({latency_chart_name(m.name): f"{m.title}: median per test case, 95% CI" for m in LATENCY_METRICS})
    titles[ACCEPTANCE_CHART] = "Draft acceptance: acceptance rate (accepted/drafted) and per-token acceptance a"
    titles[STREAM_HISTOGRAM_CHART] = "Acceptance length per request, measured from the stream, per prompt class (self-checked classes only)"
    return titles


@dataclass(frozen=True)
class Table:
    headers: tuple[str, ...]
    rows: list[tuple[str, ...]]
    flagged: tuple[int, ...] = ()  # indices of rows to highlight (measured short of the model)


# --- formatting ----------------------------------------------------------------------------------


def _number(value: Any, template: str = "{:.2f}") -> str:
    return "n/a" if value is None else template.format(value)


def _value(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ", ".join(_value(v) for v in value)
    return "" if value is None else str(value)


# --- tables --------------------------------------------------------------------------------------


def speedup_table(summary: RunSummary) -> Table:
    """Per test case, then per prompt class, one row per speculative service."""
    headers = (
        "Group",
        "Kind",
        "Service",
        *_speedup_headers(),
        "Acceptance rate",
        "Mean acceptance length",
        "a (source)",
        "Expected speedup",
        "Implied c",
        "Short of model",
    )
    rows, flagged = [], []
    for group in (*summary.test_cases, *summary.prompt_classes):
        for comparison in group.comparisons:
            if comparison.shortfall:
                flagged.append(len(rows))
            rows.append(_speedup_row(group, comparison, summary.baseline))
    return Table(headers, rows, tuple(flagged))


PER_CHUNK = "InterTokenLatency"  # llmperf's inter-token latency: per streamed chunk, not per token
TOKENS_PER_CHUNK = "Tokens per chunk (baseline / speculative)"


def _speedup_headers() -> list[str]:
    """A speedup column per metric; the per-chunk one has the tokens per chunk beside it."""
    headers = []
    for m in SPEEDUP_ORDER:
        headers.append(f"{METRIC_DISPLAY[m][0]} speedup")
        if m == PER_CHUNK:
            headers.append(TOKENS_PER_CHUNK)
    return headers


def _tokens_per_chunk(group: Group, variant: str, baseline: str) -> str:
    base, spec = group.variants.get(baseline), group.variants.get(variant)
    return " / ".join(_number(v.tokens_per_chunk.p50 if v else None) for v in (base, spec))


def _speedup_row(group: Group, comparison: Comparison, baseline: str) -> tuple[str, ...]:
    variant = group.variants.get(comparison.variant)
    figures = (variant.acceptance if variant else None) or {}
    if comparison.acceptance_source == "stream" and variant is not None and variant.stream_acceptance:
        figures = variant.stream_acceptance  # /metrics had nothing; the stream passed its self-check
    rate = figures.get("acceptance_rate")
    k = f", k={comparison.num_speculative_tokens}" if comparison.num_speculative_tokens else ""
    estimate = comparison.acceptance
    flag = {True: "yes", False: "no", None: "n/a"}[comparison.shortfall]
    speedups = []
    for m in SPEEDUP_ORDER:
        speedups.append(format_interval(comparison.speedups[m]))
        if m == PER_CHUNK:
            speedups.append(_tokens_per_chunk(group, comparison.variant, baseline))
    return (
        group.name,
        group.kind,
        comparison.variant + k,
        *speedups,
        _number(None if rate is None else rate * 100, "{:.1f}%"),
        _number(figures.get("mean_acceptance_length")),
        f"{_number(estimate.a, '{:.3f}')} ({estimate.source}" + (", stream)" if comparison.acceptance_source == "stream" else ")"),
        _number(comparison.expected_speedup, "{:.2f}x"),
        _number(comparison.implied_cost_ratio),
        flag,
    )


def acceptance_matrix(summary: RunSummary) -> Table:
    """Prompt class x speculative service: acceptance measured from the stream (mean length and
    rate with CIs, the self-check, the per-request histogram) beside /metrics and their difference."""
    headers = (
        "Prompt class",
        "Service",
        "Requests",
        "Mean acceptance length (stream)",
        "Acceptance rate (stream)",
        "Self-check",
        "Histogram of per-request length",
        "/metrics length (source)",
        "Stream - /metrics",
    )
    rows, flagged = [], []
    for group in summary.prompt_classes:
        for comparison in group.comparisons:
            variant = group.variants.get(comparison.variant)
            stream = (variant.stream_acceptance if variant else None) or {}
            metrics = (variant.acceptance if variant else None) or {}
            length_ci = Interval(**stream["mean_acceptance_length_ci"]) if stream.get("mean_acceptance_length_ci") else Interval(None)
            rate_ci = Interval(**stream["acceptance_rate_ci"]) if stream.get("acceptance_rate_ci") else Interval(None)
            reliable = stream.get("reliable")
            if stream and not reliable:
                flagged.append(len(rows))
            difference = comparison.cross_check.get("mean_acceptance_length_difference")
            rows.append(
                (
                    group.name,
                    comparison.variant,
                    str(stream.get("requests", 0)),
                    format_interval(length_ci, unit=""),
                    format_interval(rate_ci, unit="%", scale=100, digits=1),
                    "ok" if reliable else f"unreliable: {stream.get('reason', 'no stream figures')}",
                    " ".join(f"{edge}:{count}" for edge, count in (stream.get("histogram") or {}).items()) or "-",
                    f"{_number(metrics.get('mean_acceptance_length'))} ({metrics.get('source', 'missing')})",
                    _number(difference, "{:+.2f}"),
                )
            )
    return Table(headers, rows, tuple(flagged))


def latency_table(summary: RunSummary) -> Table:
    """Per group and service: p50 / p90 / p99 of each latency, and failed over all requests."""
    headers = (
        "Group",
        "Service",
        "Errors / requests",
        *(f"{METRIC_DISPLAY[m.name][0]} p50 / p90 / p99 ({METRIC_DISPLAY[m.name][2]})" for m in LATENCY_METRICS),
    )
    rows = []
    for group in (*summary.test_cases, *summary.prompt_classes):
        for variant in group.variants.values():
            cells = []
            for metric in LATENCY_METRICS:
                scale = METRIC_DISPLAY[metric.name][3]
                d = variant.distributions[metric.name]
                cells.append(" / ".join(_number(None if v is None else v * scale) for v in (d.p50, d.p90, d.p99)))
            rows.append((group.name, variant.variant, f"{variant.errors}/{variant.requests}", *cells))
    return Table(headers, rows)


def deployment_table(summary: RunSummary) -> Table:
    """What was deployed (run.json's snapshot): shared serving settings, then each service."""
    rows = []
    for section, content in summary.settings.items():
        if section == "variants":
            continue
        if isinstance(content, Mapping):
            rows.extend((f"{section}.{key}", _value(value)) for key, value in content.items())
        else:
            rows.append((section, _value(content)))
    for variant in summary.settings.get("variants") or []:
        if not isinstance(variant, Mapping):
            continue
        if variant.get("draft_model"):
            # Runs before serving stacks existed stored a draft model and no method.
            what = variant.get("speculator") if variant.get("speculator") not in (None, "none") else "draft"
            method = f"method {variant['method']}, " if variant.get("method") else ""
            role = f"{method}{what} {variant['draft_model']}, k={_value(variant.get('num_speculative_tokens'))}"
        else:
            role = "baseline (no speculation)"
        target = f"; target {variant['target_model']}" if variant.get("target_model") else ""
        stack = f"; stack {variant['stack']}" if variant.get("stack") else ""
        rows.append((f"service {variant.get('name', '?')}", role + target + stack))
    return Table(("Setting", "Value"), rows)


def load_table(summary: RunSummary) -> Table:
    multi = len(summary.levels) > 1  # the levels replace the plan's one concurrency
    rows = [(key, _value(value)) for key, value in summary.parameters.items() if value is not None and not (multi and key == "concurrency")]
    if len(summary.levels) > 1:
        rows.append(("load levels", "; ".join(describe_level(level, summary.servers_per_node) for level in summary.levels)))
    rows.append(("baseline service", summary.baseline))
    rows.append(("speculative services", _value(summary.speculative) or "none"))
    rows.append(("draft cost ratio c (model)", f"{summary.draft_cost_ratio:g}"))
    if summary.expected_test_cases:
        rows.append(("planned test cases", _value(summary.expected_test_cases)))
    return Table(("Parameter", "Value"), rows)


# --- the decision -------------------------------------------------------------------------------


# One sign for the saving everywhere: baseline - speculative, as run.json's figure_definitions
# (cost.FIGURE_DEFINITIONS["cost_saving"]) define it; positive: the speculative service is cheaper.
GOODPUT_SAVING_HEADER = "Saving within SLOs (baseline - speculative)"
# The load of a row: its level's label, said per server and per node (analysis.loads).
LOAD_HEADER = "Load (per server, per node)"

DECISION_HEADERS = (
    "Group",  # "Prompt class" or "Test case": the rest is the same in both tables
    "Service",
    "Faster?",
    "End-to-end speedup",
    "Per-token speedup (TPOT)",
    "Cost per M output tokens: baseline",
    "Cost per M: speculative",
    SAVING_HEADER,
    "Acceptance length (source)",
    "Self-check",
    "Requests (baseline / speculative)",
)


def decision_table(summary: RunSummary, kind: str = "prompt class") -> Table:
    """The answer per prompt class (or per test case, same columns): faster or not, by how much per
    answer and per token, what a million output tokens cost on each service and the saving, the
    acceptance behind it and where it came from, the stream's self-check, how many requests. A run
    at several load levels gets a row per level (its load column after the service): the answer
    can change with the load, and a figure pooled over levels answers none of them."""
    groups = summary.prompt_classes if kind == "prompt class" else summary.test_cases
    multi = len(summary.levels) > 1
    rows = []
    for group in groups:
        base = group.variants.get(summary.baseline)
        for comparison in group.comparisons:
            spec = group.variants.get(comparison.variant)
            k = f", k={comparison.num_speculative_tokens}" if comparison.num_speculative_tokens else ""
            evidence = (_acceptance_cell(comparison, spec), _self_check(spec))
            if not multi:
                saving = "; ".join(describe_saving(s, summary.price) for s in comparison.savings if s)
                saving = saving or describe_saving(None, summary.price)
                figures = (_costs(base, summary), _costs(spec, summary), saving)
                requests = f"{_requests(base)} / {_requests(spec)}"
                rows.append((group.name, comparison.variant + k, *_speeds(comparison.speedups), *figures, *evidence, requests))
                continue
            savings = {s.level: s for s in comparison.savings if s}
            for lc in comparison.levels:
                figures = (_costs(base, summary, lc.level), _costs(spec, summary, lc.level))
                saving = describe_saving(savings.get(lc.level), summary.price)
                load = describe_level(lc.level, summary.servers_per_node)
                requests = f"{lc.requests[0]} / {lc.requests[1]}"
                rows.append((group.name, comparison.variant + k, load, *_speeds(lc.speedups), *figures, saving, *evidence, requests))
    headers = ("Prompt class" if kind == "prompt class" else "Test case", DECISION_HEADERS[1], *((LOAD_HEADER,) if multi else ()))
    return Table((*headers, *DECISION_HEADERS[2:]), rows)


def _speeds(speedups: Mapping[str, Interval]) -> tuple[str, str, str]:
    headline = speedups[HEADLINE_METRIC]
    return faster(headline), format_interval(headline), format_interval(speedups[MODEL_METRIC])


def faster(interval: Interval) -> str:
    if interval.point is None:
        return "not measured"
    if not interval.known:
        return "unclear (no CI)"
    assert interval.low is not None and interval.high is not None
    return "yes" if interval.low > 1 else "no: slower" if interval.high < 1 else "no clear difference"


def _costs(variant: VariantStats | None, summary: RunSummary, level: str | None = None) -> str:
    """The cost of a million output tokens at ``level`` (None: the run's one level)."""
    if not summary.price.known:
        return NO_PRICE
    found = [t for t in (variant.throughput if variant else []) if level is None or t.level == level]
    if not found:
        return "n/a"
    return "; ".join(describe_cost(t.cost_per_million, summary.price) for t in found)


def _acceptance_cell(comparison: Comparison, variant: VariantStats | None) -> str:
    if comparison.acceptance_source == "metrics":
        figures = (variant.acceptance if variant else None) or {}
        return f"{_number(figures.get('mean_acceptance_length'))} (/metrics)"
    if comparison.acceptance_source == "stream" and variant is not None and variant.stream_acceptance:
        return f"{_number(variant.stream_acceptance.get('mean_acceptance_length'))} (stream)"
    return "not measured"


def _self_check(variant: VariantStats | None) -> str:
    stream = (variant.stream_acceptance if variant else None) or {}
    if not stream:
        return "n/a"
    return "ok" if stream.get("reliable") else f"failed: {stream.get('reason', 'no stream figures')}"


def _requests(variant: VariantStats | None) -> str:
    if variant is None:
        return "0"
    return f"{variant.requests}" + (f" ({variant.errors} failed)" if variant.errors else "")


def cost_headline(summary: RunSummary) -> str:
    """One sentence: the price used, then per prompt class the cost of a million output tokens on
    each service and the saving (baseline - speculative), at each load level the run measured,
    each figure named by its level (the levels said per server and per node)."""
    if not summary.speculative or summary.completeness == NO_DATA:
        return ""
    if not summary.price.known:  # which price is missing ("no price for <instance> in <region> (<mode>)"), when known
        if summary.price.source.startswith("no price"):
            return f"Cost per million output tokens: not computed: {summary.price.describe()}."
        return "Cost per million output tokens: not computed (no price): set results.node_price_per_hour or --node-price-per-hour."
    multi = len(summary.levels) > 1
    parts = []
    for group in summary.prompt_classes:
        base = group.variants.get(summary.baseline)
        for comparison in group.comparisons:
            spec = group.variants.get(comparison.variant)
            label = group.name if len(summary.speculative) == 1 else f"{group.name} ({comparison.variant})"
            figures = _level_costs(base, spec, comparison, multi)
            if figures:
                parts.append(f"{label}: " + ", ".join(figures) if multi else f"{label} {figures[0]}")
    if not parts:
        return ""
    at = f" at ${summary.price.per_hour:.2f} per node-hour, baseline → speculative (saving = baseline - speculative, + is cheaper)"
    if multi:
        at += ", per load level (" + "; ".join(describe_level(level, summary.servers_per_node) for level in summary.levels) + ")"
    return f"Cost per million output tokens{at}: " + "; ".join(parts) + "."


def _level_costs(base: VariantStats | None, spec: VariantStats | None, comparison: Comparison, multi: bool) -> list[str]:
    """``at c1 $4.12 → $2.20 (saving +$1.92, +47%)`` per level both services have figures at."""
    if base is None or spec is None:
        return []
    spec_at = {t.level: t for t in spec.throughput}
    saving_at = {s.level: s for s in comparison.savings if s}
    figures = []
    for b in base.throughput:
        p, saving = spec_at.get(b.level), saving_at.get(b.level)
        if p is None or saving is None or saving.dollars.point is None or saving.percent.point is None:
            continue
        if b.cost_per_million.point is None or p.cost_per_million.point is None:
            continue
        at = f"at {b.level} " if multi else ""
        change = f"saving {signed_amount(saving.dollars.point, '$')}, {signed_amount(saving.percent.point, '%')}"
        figures.append(f"{at}${b.cost_per_million.point:.2f} → ${p.cost_per_million.point:.2f} ({change})")
    return figures


def throughput_table(summary: RunSummary) -> Table:
    """Per prompt class, then test case, load level and service: tokens per second per server and
    per node while busy, the cost of a million output tokens, and the same for goodput."""
    headers = (
        "Group",
        LOAD_HEADER,
        "Service",
        "Tokens/s per server (busy)",
        "Servers per node",
        "Tokens/s per node",
        "Cost per M output tokens",
        SAVING_HEADER,
        "Goodput tokens/s per node (within SLOs)",
        "Cost per M tokens within SLOs",
        GOODPUT_SAVING_HEADER,
        "Busy s / requests",
    )
    rows = []
    for group in (*summary.prompt_classes, *summary.test_cases):
        savings = {(s.variant, s.level): s for c in group.comparisons for s in c.savings if s}
        for variant in group.variants.values():
            for t in variant.throughput:
                change = savings.get((variant.variant, t.level))
                speculative = variant.variant != summary.baseline
                rows.append(
                    (
                        group.name,
                        describe_level(t.level, summary.servers_per_node),
                        variant.variant,
                        format_interval(t.per_server, unit="", digits=1),
                        str(t.servers_per_node),
                        format_interval(t.per_node, unit="", digits=1),
                        describe_cost(t.cost_per_million, summary.price),
                        describe_saving(change, summary.price) if speculative else "-",
                        format_interval(t.goodput_per_node, unit="", digits=1) if t.goodput_per_node else "no SLO",
                        describe_cost(t.goodput_cost_per_million, summary.price) if t.goodput_per_node else "no SLO",
                        (describe_saving(change, summary.price, goodput=True) if t.goodput_per_node else "no SLO") if speculative else "-",
                        f"{t.busy_s:.1f} / {t.requests}",
                    )
                )
    return Table(headers, rows)


def cost_settings(summary: RunSummary) -> list[str]:
    slo = summary.slo or {}
    limits = ", ".join(f"{name} <= {slo[key]:g} ms" for key, name in (("ttft_ms", "TTFT"), ("tpot_ms", "TPOT")) if slo.get(key) is not None)
    return [
        f"Price: {summary.price.describe()}. The price is yours to set: -c results.node_price_per_hour=... at deploy, "
        "or --node-price-per-hour on specbench run, report and sweep-report.",
        f"Servers per node: {summary.servers_per_node} ({summary.servers_per_node_source or 'given'}).",
        f"Busy: {BUSY_DEFINITION}. Tokens/s = output tokens of successful requests / busy seconds; "
        "cost per million = price per hour / 3600 / tokens/s per node x 1e6.",
        f"Goodput SLOs: {limits or 'none recorded'} (sweep.slo_*).",
    ]


def data_quality_section(summary: RunSummary) -> list[tuple[str, Any]]:
    """What was left out or is doubtful and why: the stored parts the readers skipped, the failed
    requests per service and kind (none of them is in any figure), then the notes; empty when there
    is nothing to say (the section is then not rendered)."""
    blocks: list[tuple[str, Any]] = []
    skipped = data_quality_table(summary)
    if skipped is not None:
        blocks.append(("table", skipped))
    failed = failures_table(summary)
    if failed is not None:
        blocks.append(("table", failed))
    if summary.notes:
        blocks.append(("list", list(summary.notes)))
    return blocks


def failures_table(summary: RunSummary) -> Table | None:
    """Failed requests per service and kind (docs/benchmark.md#error-kinds); None when none failed."""
    rows = [(service, kind, str(count)) for service, kinds in summary.failures.items() for kind, count in kinds.items()]
    return Table(("Service", "Failed requests: kind", "Requests"), rows) if rows else None


# --- shared text ---------------------------------------------------------------------------------


def banner(summary: RunSummary) -> str:
    """Empty for a complete run; otherwise why the figures are not the whole run."""
    if summary.completeness == COMPLETE:
        return ""
    if summary.completeness == NO_DATA:
        return f"NO DATA: no benchmark request has been stored for this run (status: {summary.status})."
    missing = f"; no results yet for {', '.join(summary.missing_test_cases)}" if summary.missing_test_cases else ""
    services = "".join(f"; no usable result from {name}: {why}" for name, why in summary.missing_services.items())
    services += "; run.json is damaged" if (summary.data_quality.get("by_file") or {}).get("run.json") else ""
    skipped = summary.data_quality.get("skipped", 0)
    services += f"; {skipped} damaged or impossible stored part(s) left out, listed under Data quality" if skipped else ""
    return f"PARTIAL: this run is incomplete (status: {summary.status}{missing}{services}). The figures cover what was stored."


def data_quality_table(summary: RunSummary) -> Table | None:
    """What the readers left out of the stored files (specbench.results.runfiles), counted by kind and
    file, then the first skipped lines with their reason; None when nothing was left out."""
    quality = summary.data_quality
    if not quality.get("skipped"):
        return None
    rows = [
        ("records used", f"{quality.get('records_used', 0)} of {quality.get('record_lines', 0)} stored lines"),
        *((f"left out: {kind}", str(count)) for kind, count in (quality.get("by_kind") or {}).items()),
        *((f"in {name}", str(count)) for name, count in (quality.get("by_file") or {}).items()),
        *(("skipped", line) for line in quality.get("skips") or []),
    ]
    if quality["skipped"] > len(quality.get("skips") or []):
        rows.append(("skipped", f"... {quality['skipped'] - len(quality.get('skips') or [])} more, counted above"))
    return Table(("Data quality", "Value"), rows)


def how_to_read(summary: RunSummary) -> list[str]:
    confidence, resamples = _bootstrap_settings(summary)
    return [
        "Speedup = baseline median / speculative median of a latency, per test case and per prompt class "
        "(above 1.00x the speculative service is faster). "
        f"The range in brackets is the {confidence:.0%} confidence interval: a percentile bootstrap "
        f"({resamples} resamples, each service's requests resampled independently). "
        "Faster? says yes only when the whole end-to-end interval lies above 1."
        + (
            " This run measured several load levels: the verdict and the decision tables answer per level "
            "(batching helps the baseline too, so the answer can change with the load); the detailed speedup "
            "table pools the levels."
            if len(summary.levels) > 1
            else ""
        ),
        "Cost per M output tokens = the node's price per hour / 3600 / output tokens per second per node while busy x 1e6; "
        "its interval is the bootstrap of the requests (tokens and busy share). The saving is baseline - speculative, "
        "as run.json's figure_definitions.cost_saving defines it (positive: the speculative service is cheaper; "
        "negative: dearer), in dollars and % of the baseline's, each with its interval. A load level is per server "
        "(c4: 4 requests in flight at each server; r2: 2 requests/s sent to each), per node times the servers per node. "
        "At more requests in flight a server is busier with more requests at once, so tokens per "
        "second go up and the cost per token down, for both services, and the saving shrinks as batching helps the "
        "baseline too.",
        f"Expected speedup = E/(k·c+1), the standard model (Leviathan et al. 2023) for the time per output token, "
        f"with E = (1 - a^(k+1))/(1 - a) tokens per target step, k the configured speculative tokens, "
        f"a the per-token acceptance estimate and the configured draft cost ratio c = {summary.draft_cost_ratio:g}. "
        "Implied c is the cost ratio that would make the model reproduce the measured TPOT speedup.",
        "Acceptance rate is vLLM's accepted/drafted tokens, which is not a: a is the acceptance of draft position 0 "
        "where measured, else solved from the mean acceptance length or the rate.",
        "Short of model (flagged): the measured TPOT speedup's confidence interval lies entirely below the expected value.",
        "Inter-token latency is per streamed chunk, as llmperf defines it: a speculative step streams several tokens "
        "in one chunk (tokens per chunk beside it), so TPOT (time per output token after the first) is the per-token figure.",
    ]


def _bootstrap_settings(summary: RunSummary) -> tuple[float, int]:
    for group in summary.test_cases:
        for comparison in group.comparisons:
            for interval in comparison.speedups.values():
                if interval.resamples:
                    return interval.confidence, interval.resamples
    return 0.95, 0


# --- the page, as sections both renderers share ----------------------------------------------------

# Section ids in the order the page shows them (tests/test_report.py checks it).
SECTION_ORDER = ("headline", "speedup-chart", "decision", "latency", "data-quality", "deployment", "load", "how-to-read")


@dataclass(frozen=True)
class Section:
    id: str
    title: str  # "" for the headline (the page's h1 is its title)
    blocks: list[tuple[str, Any]]  # ("p" | "strong" | "banner" | "nodata" | "table" | "chart" | "list", content)


def sections(summary: RunSummary, charts: Mapping[str, Path]) -> list[Section]:
    """The report top to bottom: the answer first (headline, speedup chart, decision tables), then
    the evidence (latency charts and tables, throughput and cost per load level, acceptance), data
    quality, and the deployment's settings and the load last."""
    headline: list[tuple[str, Any]] = []
    if banner(summary):
        headline.append(("nodata" if summary.completeness == NO_DATA else "banner", banner(summary)))
    headline.append(("verdict", summary.verdict))
    if cost_headline(summary):
        headline.append(("verdict", cost_headline(summary)))
    if cross_stack_note(summary.settings):
        headline.append(("banner", cross_stack_note(summary.settings)))
    if rehearsal_note(summary.settings):
        headline.insert(0, ("banner", rehearsal_note(summary.settings)))
    result = [Section("headline", "", headline)]
    data = summary.completeness != NO_DATA
    if data and SPEEDUP_CHART in charts:
        result.append(Section("speedup-chart", "", [("chart", SPEEDUP_CHART)]))
    if data and summary.speculative:
        decision: list[tuple[str, Any]] = [("table", decision_table(summary, "prompt class"))]
        decision += [("p", f"Price: {summary.price.describe()}; {summary.servers_per_node} servers per node.")]
        result.append(Section("decision", "Decision per prompt class", decision))
        result.append(Section("decision-test-cases", "Decision per test case", [("table", decision_table(summary, "test case"))]))
    if data:
        latency: list[tuple[str, Any]] = [("chart", name) for name in chart_titles() if name != SPEEDUP_CHART and name in charts]
        latency += [("h3", "Latency per service"), ("table", latency_table(summary))]
        latency += [("h3", "Speedups in detail"), ("table", speedup_table(summary))]
        latency += [("h3", "Throughput and cost per load level"), ("list", cost_settings(summary)), ("table", throughput_table(summary))]
        if summary.speculative:
            latency += [("h3", "Acceptance per prompt class"), ("table", acceptance_matrix(summary))]
        result.append(Section("latency", "Latency, throughput and acceptance", latency))
    quality = data_quality_section(summary)
    if quality:
        result.append(Section("data-quality", "Data quality", quality))
    deployed = [("table", deployment_table(summary))] if summary.settings else [("p", "No deployment snapshot.")]
    result.append(Section("deployment", "What was deployed", deployed))
    result.append(Section("load", "Load", [("table", load_table(summary))]))
    if data:
        result.append(Section("how-to-read", "How to read this", [("p", p) for p in how_to_read(summary)]))
    return result


# --- HTML ----------------------------------------------------------------------------------------

_CSS = """
body { font-family: -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif; margin: 0.6em auto; max-width: 1320px; color: #222;
  padding: 0 1em; }
h1 { margin: 0.1em 0; font-size: 1.35em; } .meta { color: #555; margin: 0.1em 0 0.4em; font-size: 0.85em; }
h2 { font-size: 1.15em; margin: 0.6em 0 0.3em; }
.banner { padding: 0.5em 1em; font-weight: bold; border-radius: 4px; margin: 0.4em 0; }
.banner.partial { background: #fff4d6; border: 2px solid #d9a400; } .banner.nodata { background: #fde2e2; border: 2px solid #c62828; }
.verdict { font-size: 1.0em; background: #eef4fb; padding: 0.35em 0.8em; border-left: 4px solid #1f77b4; margin: 0.3em 0; }
table { border-collapse: collapse; margin: 0.3em 0 1em; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.45em; text-align: left; vertical-align: top; }
th { background: #f2f2f2; } tr.short td { background: #fde2e2; } tr.short td:last-child { font-weight: bold; color: #c62828; }
figure { margin: 0.3em 0 1em; } figure img { max-width: 100%; border: 1px solid #ddd; } figcaption { color: #555; font-size: 0.85em; }
#speedup-chart figure { margin: 0.2em 0; } #speedup-chart img { height: 330px; width: auto; }
#decision table, #decision-test-cases table { font-size: 0.82em; }
#decision p { margin: 0 0 0.4em; font-size: 0.8em; color: #555; }
"""


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def html_table(table: Table) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in table.headers)
    body = []
    for index, row in enumerate(table.rows):
        css = ' class="short"' if index in table.flagged else ""
        body.append(f"<tr{css}>" + "".join(f"<td>{_e(cell)}</td>" for cell in row) + "</tr>")
    return f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n" + "\n".join(body) + "\n</tbody>\n</table>"


def _html_block(kind: str, content: Any, charts: Mapping[str, Path]) -> str:
    if kind == "table":
        return html_table(content)
    if kind == "chart":
        title = chart_titles()[content]
        data = base64.b64encode(charts[content].read_bytes()).decode("ascii")
        return f'<figure><img alt="{_e(title)}" src="data:image/png;base64,{data}"><figcaption>{_e(title)}</figcaption></figure>'
    if kind == "list":
        return "<ul>" + "".join(f"<li>{_e(item)}</li>" for item in content) + "</ul>"
    if kind in ("banner", "nodata"):
        return f'<div class="banner {"nodata" if kind == "nodata" else "partial"}">{_e(content)}</div>'
    if kind == "verdict":
        return f'<p class="verdict">{_e(content)}</p>'
    if kind == "h3":
        return f"<h3>{_e(content)}</h3>"
    return f"<p>{_e(content)}</p>"


def render_html(summary: RunSummary, charts: Mapping[str, Path]) -> str:
    """The whole report as one self-contained page: the charts are embedded as data URIs."""
    parts = [
        f"<h1>{_e(title_prefix(summary.settings))}Speculative decoding benchmark: run {_e(summary.run_id)}</h1>",
        f'<p class="meta">Run <code>{_e(summary.run_id)}</code> · status {_e(summary.status)} · '
        f"completeness <strong>{_e(summary.completeness)}</strong>"
        + (f" · started {_e(summary.started)}" if summary.started else "")
        + (f" · finished {_e(summary.finished)}" if summary.finished else "")
        + "</p>",
    ]
    for section in sections(summary, charts):
        inner = ([f"<h2>{_e(section.title)}</h2>"] if section.title else []) + [_html_block(k, c, charts) for k, c in section.blocks]
        parts.append(f'<section id="{section.id}">\n' + "\n".join(inner) + "\n</section>")
    title = f"{_e(title_prefix(summary.settings))}specbench report: {_e(summary.run_id)}"
    return (
        f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>{title}</title>\n<style>{_CSS}</style>\n</head>\n'
        "<body>\n" + "\n".join(parts) + "\n</body>\n</html>\n"
    )


# --- Markdown ------------------------------------------------------------------------------------


def _m(text: Any) -> str:
    """Data text made inert in Markdown: HTML escaped, no table breaks."""
    return html.escape(str(text), quote=False).replace("|", "\\|").replace("\n", " ").replace("\r", " ")


def markdown_table(table: Table) -> str:
    lines = ["| " + " | ".join(_m(h) for h in table.headers) + " |", "|" + "---|" * len(table.headers)]
    for index, row in enumerate(table.rows):
        cells = [_m(cell) for cell in row]
        if index in table.flagged:
            cells[-1] = f"**{cells[-1]}**"
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _markdown_block(kind: str, content: Any, charts: Mapping[str, Path]) -> str:
    if kind == "table":
        return markdown_table(content)
    if kind == "chart":
        title = chart_titles()[content]
        return f"![{_m(title)}]({charts[content].name})\n\n*{_m(title)}*"
    if kind == "list":
        return "\n".join(f"- {_m(item)}" for item in content)
    if kind in ("banner", "nodata"):
        return f"> **{_m(content)}**"
    if kind == "verdict":
        return f"**{_m(content)}**"
    if kind == "h3":
        return f"### {_m(content)}"
    return _m(content)


def render_markdown(summary: RunSummary, charts: Mapping[str, Path]) -> str:
    """The report in Markdown, in the HTML's order; charts are referenced by file name (next to report.md)."""
    parts = [
        f"# {_m(title_prefix(summary.settings))}Speculative decoding benchmark: run {_m(summary.run_id)}",
        f"Run `{_m(summary.run_id).replace('`', '')}` · status {_m(summary.status)} · completeness **{_m(summary.completeness)}**"
        + (f" · started {_m(summary.started)}" if summary.started else "")
        + (f" · finished {_m(summary.finished)}" if summary.finished else ""),
    ]
    for section in sections(summary, charts):
        parts += ([f"## {_m(section.title)}"] if section.title else []) + [_markdown_block(k, c, charts) for k, c in section.blocks]
    return "\n\n".join(parts) + "\n"


# --- writing it ----------------------------------------------------------------------------------


def write_report(summary: RunSummary, out_dir: Path, charts: bool = True) -> dict[str, Path]:
    """Write the charts (none without data, none when ``charts`` is False), report.html and report.md
    into ``out_dir``; returns name -> path: "html", "markdown" and each chart's name."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    drawn: dict[str, Path] = {}
    if charts and summary.completeness != NO_DATA:
        from specbench.outputs.report_charts import write_charts  # matplotlib: only when there is something to draw

        drawn = write_charts(summary, out_dir)
    written = {"html": out_dir / "report.html", "markdown": out_dir / "report.md"}
    written["html"].write_text(render_html(summary, drawn), encoding="utf-8")
    written["markdown"].write_text(render_markdown(summary, drawn), encoding="utf-8")
    return {**written, **drawn}
