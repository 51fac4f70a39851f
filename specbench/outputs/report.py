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
    LATENCY_METRICS,
    NO_DATA,
    SPEEDUP_ORDER,
    Comparison,
    Group,
    RunSummary,
    cross_stack_note,
)
from specbench.analysis.stats import Interval, format_interval
from specbench.outputs.report_names import ACCEPTANCE_CHART, METRIC_DISPLAY, SPEEDUP_CHART, STREAM_HISTOGRAM_CHART, latency_chart_name


def chart_titles() -> dict[str, str]:
    """Chart name (its PNG is ``<name>.png``) -> caption, in the report's order."""
    titles = {latency_chart_name(m.name): f"{m.title}: median per test case, 95% CI" for m in LATENCY_METRICS}
    titles[ACCEPTANCE_CHART] = "Draft acceptance: acceptance rate (accepted/drafted) and per-token acceptance a"
    titles[SPEEDUP_CHART] = "Time-per-output-token speedup: measured (95% CI) against the model's expectation"
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
        *(f"{METRIC_DISPLAY[m][0]} speedup" for m in SPEEDUP_ORDER),
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
            rows.append(_speedup_row(group, comparison))
    return Table(headers, rows, tuple(flagged))


def _speedup_row(group: Group, comparison: Comparison) -> tuple[str, ...]:
    variant = group.variants.get(comparison.variant)
    figures = (variant.acceptance if variant else None) or {}
    if comparison.acceptance_source == "stream" and variant is not None and variant.stream_acceptance:
        figures = variant.stream_acceptance  # /metrics had nothing; the stream passed its self-check
    rate = figures.get("acceptance_rate")
    k = f", k={comparison.num_speculative_tokens}" if comparison.num_speculative_tokens else ""
    estimate = comparison.acceptance
    flag = {True: "yes", False: "no", None: "n/a"}[comparison.shortfall]
    return (
        group.name,
        group.kind,
        comparison.variant + k,
        *(format_interval(comparison.speedups[m]) for m in SPEEDUP_ORDER),
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
    rows = [(key, _value(value)) for key, value in summary.parameters.items() if value is not None]
    rows.append(("baseline service", summary.baseline))
    rows.append(("speculative services", _value(summary.speculative) or "none"))
    rows.append(("draft cost ratio c (model)", f"{summary.draft_cost_ratio:g}"))
    if summary.expected_test_cases:
        rows.append(("planned test cases", _value(summary.expected_test_cases)))
    return Table(("Parameter", "Value"), rows)


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
        f"({resamples} resamples, each service's requests resampled independently).",
        f"Expected speedup = E/(k·c+1), the standard model (Leviathan et al. 2023) for the time per output token, "
        f"with E = (1 - a^(k+1))/(1 - a) tokens per target step, k the configured speculative tokens, "
        f"a the per-token acceptance estimate and the configured draft cost ratio c = {summary.draft_cost_ratio:g}. "
        "Implied c is the cost ratio that would make the model reproduce the measured TPOT speedup.",
        "Acceptance rate is vLLM's accepted/drafted tokens, which is not a: a is the acceptance of draft position 0 "
        "where measured, else solved from the mean acceptance length or the rate.",
        "Short of model (flagged): the measured TPOT speedup's confidence interval lies entirely below the expected value.",
        "Inter-token latency is per streamed chunk, as llmperf defines it: a speculative step streams several tokens "
        "in one chunk, so TPOT (time per output token after the first) is the per-token figure.",
    ]


def _bootstrap_settings(summary: RunSummary) -> tuple[float, int]:
    for group in summary.test_cases:
        for comparison in group.comparisons:
            for interval in comparison.speedups.values():
                if interval.resamples:
                    return interval.confidence, interval.resamples
    return 0.95, 0


def _charts_in_order(charts: Mapping[str, Path]) -> list[tuple[str, str, Path]]:
    return [(name, title, charts[name]) for name, title in chart_titles().items() if name in charts]


# --- HTML ----------------------------------------------------------------------------------------

_CSS = """
body { font-family: -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; }
h1 { margin-bottom: 0.2em; } .meta { color: #555; }
.banner { padding: 0.8em 1em; font-weight: bold; border-radius: 4px; margin: 1em 0; }
.banner.partial { background: #fff4d6; border: 2px solid #d9a400; } .banner.nodata { background: #fde2e2; border: 2px solid #c62828; }
.verdict { font-size: 1.1em; background: #eef4fb; padding: 0.6em 1em; border-left: 4px solid #1f77b4; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: left; vertical-align: top; }
th { background: #f2f2f2; } tr.short td { background: #fde2e2; } tr.short td:last-child { font-weight: bold; color: #c62828; }
figure { margin: 1em 0 2em; } figure img { max-width: 100%; border: 1px solid #ddd; } figcaption { color: #555; }
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


def render_html(summary: RunSummary, charts: Mapping[str, Path]) -> str:
    """The whole report as one self-contained page: the charts are embedded as data URIs."""
    parts = [
        f"<h1>Speculative decoding benchmark: run {_e(summary.run_id)}</h1>",
        f'<p class="meta">Run <code>{_e(summary.run_id)}</code> · status {_e(summary.status)} · '
        f"completeness <strong>{_e(summary.completeness)}</strong>"
        + (f" · started {_e(summary.started)}" if summary.started else "")
        + (f" · finished {_e(summary.finished)}" if summary.finished else "")
        + "</p>",
    ]
    if banner(summary):
        css = "nodata" if summary.completeness == NO_DATA else "partial"
        parts.append(f'<div class="banner {css}">{_e(banner(summary))}</div>')
    parts.append(f'<p class="verdict">{_e(summary.verdict)}</p>')
    if cross_stack_note(summary.settings):
        parts.append(f'<div class="banner partial">{_e(cross_stack_note(summary.settings))}</div>')
    parts += ["<h2>What was deployed</h2>", html_table(deployment_table(summary)) if summary.settings else "<p>No deployment snapshot.</p>"]
    parts += ["<h2>Load</h2>", html_table(load_table(summary))]
    if summary.completeness != NO_DATA:
        parts += ["<h2>Speedups</h2>", html_table(speedup_table(summary))]
        if summary.speculative:
            parts += ["<h2>Acceptance per prompt class</h2>", html_table(acceptance_matrix(summary))]
        parts += ["<h2>Charts</h2>"] if charts else []
        for _, title, path in _charts_in_order(charts):
            data = base64.b64encode(path.read_bytes()).decode("ascii")
            parts.append(f'<figure><img alt="{_e(title)}" src="data:image/png;base64,{data}"><figcaption>{_e(title)}</figcaption></figure>')
        parts += ["<h2>Latency per service</h2>", html_table(latency_table(summary))]
    if data_quality_table(summary):
        parts += ["<h2>Data quality</h2>", html_table(data_quality_table(summary))]  # type: ignore[arg-type]
    if summary.notes:
        parts += ["<h2>Notes</h2>", "<ul>" + "".join(f"<li>{_e(note)}</li>" for note in summary.notes) + "</ul>"]
    if summary.completeness != NO_DATA:
        parts += ["<h2>How to read this</h2>", *(f"<p>{_e(p)}</p>" for p in how_to_read(summary))]
    title = f"specbench report: {_e(summary.run_id)}"
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


def render_markdown(summary: RunSummary, charts: Mapping[str, Path]) -> str:
    """The report in Markdown; charts are referenced by file name (they sit next to report.md)."""
    parts = [
        f"# Speculative decoding benchmark: run {_m(summary.run_id)}",
        f"Run `{_m(summary.run_id).replace('`', '')}` · status {_m(summary.status)} · completeness **{_m(summary.completeness)}**"
        + (f" · started {_m(summary.started)}" if summary.started else "")
        + (f" · finished {_m(summary.finished)}" if summary.finished else ""),
    ]
    if banner(summary):
        parts.append(f"> **{_m(banner(summary))}**")
    parts.append(f"**Verdict:** {_m(summary.verdict)}")
    if cross_stack_note(summary.settings):
        parts.append(f"> **{_m(cross_stack_note(summary.settings))}**")
    parts += ["## What was deployed", markdown_table(deployment_table(summary)) if summary.settings else "No deployment snapshot."]
    parts += ["## Load", markdown_table(load_table(summary))]
    if summary.completeness != NO_DATA:
        parts += ["## Speedups", markdown_table(speedup_table(summary))]
        if summary.speculative:
            parts += ["## Acceptance per prompt class", markdown_table(acceptance_matrix(summary))]
        parts += ["## Charts"] if charts else []
        parts += [f"![{_m(title)}]({path.name})\n\n*{_m(title)}*" for _, title, path in _charts_in_order(charts)]
        parts += ["## Latency per service", markdown_table(latency_table(summary))]
    if data_quality_table(summary):
        parts += ["## Data quality", markdown_table(data_quality_table(summary))]  # type: ignore[arg-type]
    if summary.notes:
        parts += ["## Notes", "\n".join(f"- {_m(note)}" for note in summary.notes)]
    if summary.completeness != NO_DATA:
        parts += ["## How to read this", *(_m(p) for p in how_to_read(summary))]
    return "\n\n".join(parts) + "\n"


# --- writing it ----------------------------------------------------------------------------------


def write_report(summary: RunSummary, out_dir: Path) -> dict[str, Path]:
    """Write the charts (none without data), report.html and report.md into ``out_dir``; returns
    name -> path: "html", "markdown" and each chart's name."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    charts: dict[str, Path] = {}
    if summary.completeness != NO_DATA:
        from specbench.outputs.report_charts import write_charts  # matplotlib: only when there is something to draw

        charts = write_charts(summary, out_dir)
    written = {"html": out_dir / "report.html", "markdown": out_dir / "report.md"}
    written["html"].write_text(render_html(summary, charts), encoding="utf-8")
    written["markdown"].write_text(render_markdown(summary, charts), encoding="utf-8")
    return {**written, **charts}
