"""Names the report and its charts share (chart file names, metric labels), in a module of their own:
report.py imports report_charts.py to draw, so report_charts.py must not import report.py."""

from __future__ import annotations

# metric name -> (short label, file-name slug, unit, scale from seconds)
METRIC_DISPLAY: dict[str, tuple[str, str, str, float]] = {
    "EndToEndLatency": ("End-to-end", "end-to-end", "s", 1.0),
    "InterTokenLatency": ("Inter-token (per chunk)", "inter-token", "ms", 1000.0),
    "TTFT": ("TTFT", "ttft", "ms", 1000.0),
    "TimePerOutputToken": ("TPOT", "tpot", "ms", 1000.0),
}
ACCEPTANCE_CHART, SPEEDUP_CHART = "acceptance", "speedup"
STREAM_HISTOGRAM_CHART = "stream-acceptance-histogram"


def latency_chart_name(metric: str) -> str:
    return f"latency-{METRIC_DISPLAY[metric][1]}"
