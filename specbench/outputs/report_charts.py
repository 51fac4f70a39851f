"""The report's charts: PNGs drawn with matplotlib's Agg backend, the same bytes for the same summary
(default style whatever the local matplotlibrc says, fixed size and dpi, no software stamp).

Needs matplotlib (``pip install -r specbench/requirements-report.txt``); only ``specbench report`` imports it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # before anything imports pyplot: no display needed, same pixels everywhere

from matplotlib import style  # noqa: E402
from matplotlib.artist import Artist  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from specbench.analysis.aggregate import LATENCY_METRICS, MODEL_METRIC, NO_DATA, Comparison, Group, RunSummary  # noqa: E402
from specbench.analysis.stats import Interval  # noqa: E402
from specbench.outputs.report_names import ACCEPTANCE_CHART, METRIC_DISPLAY, SPEEDUP_CHART, STREAM_HISTOGRAM_CHART, latency_chart_name  # noqa: E402

FIGSIZE, DPI = (11.0, 5.0), 100  # 1100 x 500 pixels
# Names and labels come from data: never read "$...$" in them as mathtext.
RC = {"text.parse_math": False, "axes.grid": True, "axes.grid.axis": "y", "grid.alpha": 0.4, "axes.axisbelow": True}
BASELINE_COLOR, SPECULATIVE_COLORS = "#8c8c8c", ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#17becf")
SHORT_COLOR = "#d62728"
UNKNOWN = Interval(None)


def write_charts(summary: RunSummary, out_dir: Path) -> dict[str, Path]:
    """Every chart the summary has data for: chart name -> ``<out_dir>/<name>.png``."""
    if summary.completeness == NO_DATA:
        return {}
    drawers = {latency_chart_name(m.name): (lambda ax, m=m.name: latency_chart(ax, summary, m)) for m in LATENCY_METRICS}
    drawers[ACCEPTANCE_CHART] = lambda ax: acceptance_chart(ax, summary)
    drawers[SPEEDUP_CHART] = lambda ax: speedup_chart(ax, summary)
    drawers[STREAM_HISTOGRAM_CHART] = lambda ax: stream_histogram_chart(ax, summary)
    written = {}
    with style.context("default"), matplotlib.rc_context(RC):
        for name, draw in drawers.items():
            figure = Figure(figsize=FIGSIZE, dpi=DPI, layout="constrained")
            if draw(figure.add_subplot()):
                path = Path(out_dir) / f"{name}.png"
                figure.savefig(path, format="png", dpi=DPI, metadata={"Software": None})
                written[name] = path
    return written


def _color(summary: RunSummary, variant: str) -> str:
    if variant == summary.baseline:
        return BASELINE_COLOR
    return SPECULATIVE_COLORS[summary.speculative.index(variant) % len(SPECULATIVE_COLORS)]


def _offsets(count: int, width: float = 0.8) -> tuple[list[float], float]:
    bar = width / max(count, 1)
    return [-width / 2 + bar * (i + 0.5) for i in range(count)], bar


def _error_bars(ax: Axes, xs: Sequence[float], intervals: Sequence[Interval], scale: float = 1.0) -> None:
    """Asymmetric error bars for the intervals that are known; none for the others."""
    known = [(x, i) for x, i in zip(xs, intervals, strict=True) if i.known and i.point is not None]
    if not known:
        return
    below = [max(0.0, (i.point - i.low) * scale) for _, i in known]  # type: ignore[operator]
    above = [max(0.0, (i.high - i.point) * scale) for _, i in known]  # type: ignore[operator]
    points = [i.point * scale for _, i in known]  # type: ignore[operator]
    ax.errorbar([x for x, _ in known], points, yerr=[below, above], fmt="none", ecolor="black", elinewidth=1, capsize=3)


def _x_axis(ax: Axes, labels: Sequence[str]) -> None:
    ax.set_xticks(range(len(labels)), labels, rotation=20 if len(labels) > 4 else 0, ha="right" if len(labels) > 4 else "center")
    ax.set_xlim(-0.6, len(labels) - 0.4)


def latency_chart(ax: Axes, summary: RunSummary, metric: str) -> bool:
    """Per test case, one bar per service: the median, its bootstrap CI as error bar."""
    label, _, unit, scale = METRIC_DISPLAY[metric]
    cases = summary.test_cases
    medians = {
        variant: [case.variants[variant].medians[metric] if variant in case.variants else UNKNOWN for case in cases]
        for variant in (summary.baseline, *summary.speculative)
    }
    drawn = [variant for variant, values in medians.items() if any(m.point is not None for m in values)]
    offsets, width = _offsets(len(drawn))
    for offset, variant in zip(offsets, drawn, strict=True):
        present = [(x + offset, m) for x, m in enumerate(medians[variant]) if m.point is not None]
        xs = [x for x, _ in present]
        ax.bar(xs, [m.point * scale for _, m in present], width, label=variant, color=_color(summary, variant))  # type: ignore[operator]
        _error_bars(ax, xs, [m for _, m in present], scale)
    if drawn:
        title = next(m.title for m in LATENCY_METRICS if m.name == metric)
        ax.set_title(f"{title}: median per test case (error bars: 95% bootstrap CI)")
        ax.set_ylabel(f"{label} ({unit})")
        _x_axis(ax, [case.name for case in cases])
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return bool(drawn)


def acceptance_chart(ax: Axes, summary: RunSummary) -> bool:
    """Per test case and speculative service: vLLM's acceptance rate and the per-token acceptance a."""
    cases = summary.test_cases
    series = {
        (variant, measure): [_acceptance_value(case, variant, measure) for case in cases]
        for variant in summary.speculative
        for measure in ("rate", "a")
    }
    drawn = [key for key, values in series.items() if any(v is not None for v in values)]
    offsets, width = _offsets(len(drawn))
    for offset, (variant, measure) in zip(offsets, drawn, strict=True):
        present = [(x + offset, v) for x, v in enumerate(series[variant, measure]) if v is not None]
        name = f"{variant}: acceptance rate" if measure == "rate" else f"{variant}: a (per-token estimate)"
        bars = ax.bar(
            [x for x, _ in present],
            [v for _, v in present],
            width,
            label=name,
            color=_color(summary, variant),
            alpha=1.0 if measure == "rate" else 0.55,
            hatch="" if measure == "rate" else "//",
            edgecolor="black",
            linewidth=0.5,
        )
        ax.bar_label(bars, fmt="%.2f", fontsize=8, padding=2)
    if drawn:
        ax.set_title("Draft acceptance per test case")
        ax.set_ylabel("fraction of drafted tokens / probability")
        ax.set_ylim(0.0, 1.1)
        _x_axis(ax, [case.name for case in cases])
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return bool(drawn)


def stream_histogram_chart(ax: Axes, summary: RunSummary) -> bool:
    """Per prompt class (and speculative service): how many requests had each acceptance length, as
    measured from the stream; a class whose stream failed the self-check is left out, never drawn."""
    drawn = 0
    for group in summary.prompt_classes:
        for variant in summary.speculative:
            stream = (group.variants[variant].stream_acceptance if variant in group.variants else None) or {}
            histogram = stream.get("histogram") or {}
            if not stream.get("reliable") or not histogram:
                continue
            lows = [float(edge) for edge in histogram]
            edges = [lows[0] + 0.5 * i for i in range(round((lows[-1] - lows[0]) / 0.5) + 2)]
            counts = [histogram.get(f"{edge:g}", 0) for edge in edges[:-1]]
            label = group.name if len(summary.speculative) == 1 else f"{group.name} · {variant}"
            ax.stairs(counts, edges, label=label, linewidth=1.5)
            drawn += 1
    if drawn:
        ax.set_title("Acceptance length per request (stream)")
        ax.set_xlabel("mean tokens per decode chunk (accepted drafts + 1)")
        ax.set_ylabel("requests")
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return bool(drawn)


def _acceptance_value(case: Group, variant: str, measure: str) -> float | None:
    if measure == "a":
        return next((c.acceptance.a for c in case.comparisons if c.variant == variant), None)
    stats_ = case.variants.get(variant)
    figures = (stats_.acceptance if stats_ else None) or {}
    return figures.get("acceptance_rate")


def speedup_chart(ax: Axes, summary: RunSummary) -> bool:
    """Per test case and prompt class: measured TPOT speedup (bar, CI) next to the model's (marker);
    groups short of the model get a red hatched bar and a red label. A run at several load levels
    gets a bar per service and level (lighter at higher loads): pooled, the levels answer none."""
    groups = [*summary.test_cases, *summary.prompt_classes]
    shown = [v for v in summary.speculative if any(_speedup_or_expected(c) for g in groups for c in g.comparisons if c.variant == v)]
    if not shown:
        return False
    levels: list[str | None] = list(summary.levels) if len(summary.levels) > 1 else [None]
    series = [(variant, level) for variant in shown for level in levels]
    offsets, width = _offsets(len(series))
    handles: list[Artist] = []
    short = [False] * len(groups)
    for offset, (variant, level) in zip(offsets, series, strict=True):
        found = [(x, c) for x, g in enumerate(groups) for c in g.comparisons if c.variant == variant]
        measured = [(x, c, m) for x, c in found if (m := _tpot_at(c, level)).point is not None]
        alpha = 1.0 - 0.55 * (levels.index(level) / max(len(levels) - 1, 1))
        if measured:
            flags = [_short(c, m) for _, c, m in measured]
            for (x, _, _), flag in zip(measured, flags, strict=True):
                short[x] = short[x] or flag
            xs = [x + offset for x, _, _ in measured]
            ax.bar(
                xs,
                [m.point for _, _, m in measured],
                width,
                color=_color(summary, variant),
                alpha=alpha,
                hatch=["xx" if f else "" for f in flags],
                edgecolor=[SHORT_COLOR if f else "none" for f in flags],
                linewidth=2,
            )
            _error_bars(ax, xs, [m for _, _, m in measured])
            at = f" at {level}" if level else ""
            handles.append(Patch(color=_color(summary, variant), alpha=alpha, label=f"{variant}{at}: measured TPOT speedup (95% CI)"))
        expected = [(x + offset, c.expected_speedup) for x, c in found if c.expected_speedup is not None]
        ax.scatter([x for x, _ in expected], [e for _, e in expected], marker="D", s=45, color="black", zorder=3)
    handles.append(Line2D([], [], marker="D", color="black", linestyle="none", label=f"expected (model, c={summary.draft_cost_ratio:g})"))
    if any(short):
        handles.append(Patch(facecolor="white", edgecolor=SHORT_COLOR, hatch="xx", label="short of model: CI below expected"))
    ax.axhline(1.0, color="black", linewidth=1, linestyle="--")
    if summary.test_cases and summary.prompt_classes:
        ax.axvline(len(summary.test_cases) - 0.5, color="#555555", linewidth=1, linestyle=":")
    ax.set_title("Time-per-output-token speedup over the baseline: measured vs the model" + (", per load level" if levels[0] else ""))
    ax.set_ylabel("speedup (x)")
    ax.set_ylim(bottom=0.0)
    _x_axis(ax, [g.name if g.kind == "test case" else f"{g.name} (class)" for g in groups])
    for label, flagged in zip(ax.get_xticklabels(), short, strict=True):
        if flagged:
            label.set_color(SHORT_COLOR)
            label.set_fontweight("bold")
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return True


def _tpot_at(comparison: Comparison, level: str | None) -> Interval:
    """The TPOT speedup pooled (``level`` None: a run at one level) or at one level."""
    if level is None:
        return comparison.speedups[MODEL_METRIC]
    return next((lc.speedups[MODEL_METRIC] for lc in comparison.levels if lc.level == level), UNKNOWN)


def _short(comparison: Comparison, measured: Interval) -> bool:
    """Short of the model: the measured interval lies below the expected speedup (Comparison.shortfall)."""
    expected = comparison.expected_speedup
    return expected is not None and measured.high is not None and measured.high < expected


def _speedup_or_expected(comparison: Comparison) -> bool:
    return comparison.speedups[MODEL_METRIC].point is not None or comparison.expected_speedup is not None
