"""A sweep's report: the recommendation table first, then per prompt class the speedup-vs-k curves
(measured with 95 % CIs, the model's curve beside), latency and throughput against load, the
crossover, goodput and the baseline's drift; Markdown with PNG charts, the analysis as JSON, and the
dashboard's text widgets (the table and per-point bars).

    specbench sweep-report --results ./results --sweep-id demo-sweep --out ./sweep-report

Reads ``<results>/sweeps/<sweep_id>/<point_id>/`` (each a normal stored run whose run.json has a
``sweep`` object); the folder is listed once, then each point's files are read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from specbench import jsonfile
from specbench.analysis.cost import NodePrice, describe_cost
from specbench.analysis.loads import describe_level
from specbench.analysis.stats import Interval, format_interval
from specbench.analysis.sweep import METRIC_TITLES, TPOT, ClassAnalysis, Point, SweepAnalysis, points_from_run
from specbench.analysis.sweep_mix import describe_cost as describe_mix_cost
from specbench.results import runfiles
from specbench.results.store import LOCK_FILE
from specbench.sweep import checked
from specbench.sweep.points import check_sweep_id

SWEEPS_PREFIX = "sweeps/"
MAX_BAR = 20  # characters of the longest per-point bar in the dashboard's text widgets


class _Folder:
    """A RunStore-like view of one point's folder, answering from one listing of the whole sweep."""

    def __init__(self, store: Any, prefix: str, keys: Sequence[str]) -> None:
        self.store, self.prefix, self._keys = store, prefix, list(keys)

    def keys(self, prefix: str = "") -> list[str]:
        return [key for key in self._keys if key.startswith(prefix)]

    def read(self, key: str) -> str:
        return self.store.read_text(self.prefix + key)

    def writer_alive(self) -> bool | None:
        """Whether the point's writer holds its lock (specbench/results/store.py; None: no lock file)."""
        probe = getattr(self.store, "writer_alive", None)
        return probe(f"{self.prefix}{LOCK_FILE}") if probe else None


def load_sweep_points(
    store: Any,
    sweep_id: str,
    runs: list[dict[str, Any]] | None = None,
    read: list[runfiles.RunFiles] | None = None,
    left_out: list[str] | None = None,
) -> list[Point]:
    """The usable points stored under ``sweeps/<sweep_id>/`` of a results store (specbench.store); each
    used point's run.json is appended to ``runs`` when given (the deployment's settings are in it), and
    each point's files as read (with what was skipped) to ``read``. A point that is not this sweep's,
    contradicts its own point id, is running, failed or duplicated (specbench/sweep/checked.py
    check_grid) is left out, ``"<point>: <why>"`` appended to ``left_out``; a point whose run.json
    cannot place it is left out too, its records counted as skipped."""
    folders = load_sweep_folders(store, sweep_id, read)
    verdict = checked.check_grid([f for f in folders if f.points], sweep_id)
    if left_out is not None:
        left_out += [f"{name}: {why}" for name, why in verdict.left_out]
    used = {id(p) for p in verdict.used}
    points = []
    for folder in folders:
        mine = [p for p in folder.points if id(p) in used]
        if mine and runs is not None:
            runs.append(dict(folder.run))
        points += mine
    return points


def load_sweep_folders(store: Any, sweep_id: str, read: list[runfiles.RunFiles] | None = None) -> list[checked.Folder]:
    """Each point folder under ``sweeps/<sweep_id>/`` as read: run.json, whether its writer holds
    the lock, what was lost to damage, and its points (none when run.json cannot place it)."""
    base = f"{SWEEPS_PREFIX}{check_sweep_id(sweep_id)}/"  # a DNS label: the id the sweep's Jobs were named with
    by_point: dict[str, list[str]] = {}
    for key in store.keys(base):
        point, _, rest = key[len(base) :].partition("/")
        if rest:
            by_point.setdefault(point, []).append(rest)
    folders = []
    for point, keys in sorted(by_point.items()):
        if "run.json" not in keys:
            continue
        folder = _Folder(store, f"{base}{point}/", keys)
        files = runfiles.load_run(folder, keys)
        files.keys_prefix = f"{point}/"
        if read is not None:
            read.append(files)
        lost = [str(s) for s in files.skipped if s.kind != runfiles.DUPLICATE]
        found = checked.Folder(point, files.run, folder.writer_alive(), lost)
        sweep = files.run.get("sweep")
        if not (isinstance(sweep, dict) and "name" in (sweep.get("variant") or {}) and "value" in (sweep.get("load") or {})):
            # The point's variant and load are in run.json's sweep object: without them it cannot be placed.
            files.drop_records("left out with its point: run.json does not say the point's variant and load (sweep.variant, sweep.load)")
            folders.append(found)
            continue
        placed = points_from_run(files.run, files.records, files.acceptance, f"{store.location.rstrip('/')}/{base}{point}")
        folders.append(replace(found, points=tuple(placed)))
    return folders


# --- Markdown ------------------------------------------------------------------------------------


def markdown(analysis: SweepAnalysis, charts: Mapping[str, str] | None = None, staged: Sequence[Mapping[str, Any]] = ()) -> str:
    """``staged``: a staged sweep's after-stage documents (specbench/outputs/sweep_next.py), for its section."""
    from specbench.outputs.sweep_next import staged_section

    charts = charts or {}
    metric = METRIC_TITLES[analysis.metric]
    lines = [f"# Sweep {analysis.sweep_id or '(unnamed)'}"]
    # More than one deployment measured (several TPs): the report opens with their ranking (issue 37).
    several = len({c.tp for ranking in analysis.mix for c in ranking.ranked}) > 1
    if several:
        lines += mix_section(analysis, heading="##")
    lines += ["", "## Recommendations", ""]
    lines += [
        f"Best measured {metric} speedup against the baseline at the same load, with its {analysis.confidence:.0%} bootstrap CI;",
        "'indistinguishable' lists points whose speedup difference from the best has a CI containing 0 (bootstrap of the difference);",
        "the model's optimum is the standard model's best k with the measured acceptance and the fitted draft cost.",
        "",
    ]
    lines += [
        f"Cost per million output tokens at {analysis.price.describe()}, {analysis.servers_per_node} servers per node; busy = at "
        "least one request in flight (the union of request windows), tokens/s = output tokens / busy seconds.",
        "",
    ]
    lines += [f"- {line}" for line in analysis.summary] or ["- no data"]
    if not several:
        lines += mix_section(analysis)
    lines += ["", "Per load, with the model's optimum and the points indistinguishable from the best:", ""]
    lines += [f"- {line}" for line in analysis.table]
    for note in analysis.notes:
        lines.append(f"- NOTE: {note}")
    section = staged_section(staged)
    lines += ["", *section] if section else []
    for cls in analysis.classes:
        lines += ["", f"## {cls.title} prompts", ""]
        lines += _curve_table(cls, analysis.servers_per_node)
        lines += ["", f"### Against load: baseline and {cls.best_variant}", ""]
        lines += _load_table(cls, analysis.price, analysis.servers_per_node)
        lines.append("")
        for crossing in cls.crossovers:
            lines.append(f"- Crossover ({crossing.kind}): {crossing.text}")
        for drift in cls.drift:
            lines.append(f"- Baseline drift: {drift.text}")
        for name, path in charts.items():
            if name.startswith(_slug(cls.title) + "-speedup-") or name == _slug(cls.title) + "-load":
                lines += ["", f"![{name}]({path})"]
    return "\n".join(lines) + "\n"


def mix_section(analysis: SweepAnalysis, heading: str = "###") -> list[str]:
    """The cheapest configuration within the SLOs per load for the traffic mix, over every TP
    (specbench/analysis/sweep_mix.py), and the ranking behind it."""
    if not analysis.mix:
        return []
    unit = "USD" if analysis.price.known else "node-hours"
    lines = [
        "",
        f"{heading} Cheapest configuration for the traffic mix",
        "",
        f"Per load (per server), every measured configuration by its mix-weighted cost of a million output tokens ({unit}; "
        f"{analysis.confidence:.0%} bootstrap CI, each class's requests resampled), a server charged its TP's share of the node "
        "(servers per node = logical cores per node // TP); within the SLOs: every weighted class's median TPOT and TTFT.",
        "",
    ]
    lines += [f"- {ranking.text}" for ranking in analysis.mix]
    for ranking in analysis.mix:
        lines += ["", f"| {ranking.load_text}: configuration | TP | servers per node | cost per M output tokens | within the SLOs |"]
        lines.append("| --- | --- | --- | --- | --- |")
        for c in ranking.ranked:
            mark = "yes" if c.within_slo else f"no: {c.broken}"
            best = " (cheapest)" if c.variant == ranking.best else (" (tie)" if c.variant in ranking.ties else "")
            lines.append(
                f"| {c.variant}{best} | {c.tp or 'services'} | {c.servers_per_node} | {describe_mix_cost(c, analysis.price)} | {mark} |"
            )
        lines += [f"- not ranked: {item}" for item in ranking.unranked]
    return lines


def _curve_table(cls: ClassAnalysis, servers_per_node: int) -> list[str]:
    rows = [
        "| load (per server, per node) | draft | k | point | TPOT speedup | E2E speedup | model (TPOT) | a | fitted c | requests |",
        "|" + "---|" * 10,
    ]
    for label, drafts in cls.curves.items():
        for draft in drafts:
            for cp in draft.points:
                predicted = f"{cp.predicted:.2f}x" if cp.predicted is not None else "n/a"
                a = f"{draft.a:.3f} ({draft.a_source})" if draft.a is not None else "n/a"
                c = f"{draft.c:.3f}" if draft.c is not None else "n/a"
                load = describe_level(label, servers_per_node)
                rows.append(
                    f"| {load} | {draft.draft_model} | {cp.k} | {cp.variant} | {format_interval(cp.tpot)} | "
                    f"{format_interval(cp.e2e)} | {predicted} | {a} | {c} | {cp.requests} |"
                )
    return rows


def _interval(interval: Interval, fallback: float | None) -> str:
    return format_interval(interval, unit="", digits=1) if interval.point is not None else _num(fallback)


def _cost(interval: Interval, price: NodePrice) -> str:
    return describe_cost(interval, price)


def _goodput_cost(interval: Interval | None, price: NodePrice) -> str:
    return "no SLO" if interval is None else describe_cost(interval, price)


def _load_table(cls: ClassAnalysis, price: NodePrice, servers_per_node: int) -> list[str]:
    rows = [
        "| variant | load (per server, per node) | tokens/s per user | tokens/s per node (busy) | cost per M output tokens | "
        "cost per M within SLOs | "
        "TTFT p50/p90 (ms) | TPOT p50/p90 (ms) | goodput | speedup | Pareto |",
        "|" + "---|" * 11,
    ]
    front = {(p.variant, p.load) for p in cls.pareto}
    for p in cls.load_points:
        goodput = f"{p.goodput:.0%}" if p.goodput is not None else "no SLO"
        rows.append(
            f"| {p.variant} | {describe_level(p.load.label, servers_per_node)} | {_num(p.tokens_per_s_per_user)} | "
            f"{_interval(p.per_node, p.tokens_per_s_per_node)} | "
            f"{_cost(p.cost_per_million, price)} | {_goodput_cost(p.goodput_cost_per_million, price)} | "
            f"{_ms(p.ttft.p50)}/{_ms(p.ttft.p90)} | {_ms(p.tpot.p50)}/{_ms(p.tpot.p90)} | {goodput} | "
            f"{format_interval(p.speedup) if p.speedup else '-'} | {'yes' if (p.variant, p.load) in front else ''} |"
        )
    return rows


def _num(value: float | None) -> str:
    return f"{value:.1f}" if value is not None else "n/a"


def _ms(value: float | None) -> str:
    return f"{value * 1000:.1f}" if value is not None else "n/a"


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in text.lower())


# --- charts --------------------------------------------------------------------------------------


def write_charts(analysis: SweepAnalysis, out_dir: Path) -> dict[str, Path]:
    """Per class: speedup vs k at each load (one line per draft, the model's curve dashed), and
    latency/throughput vs load. Same conventions as the run report (specbench.report_charts)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import style
    from matplotlib.figure import Figure

    from specbench.outputs.report_charts import DPI, FIGSIZE, RC

    written: dict[str, Path] = {}
    source = f"source: sweep {analysis.sweep_id}, {analysis.resamples} bootstrap resamples"
    with style.context("default"), matplotlib.rc_context(RC):
        for cls in analysis.classes:
            for label, drafts in cls.curves.items():
                figure = Figure(figsize=FIGSIZE, dpi=DPI, layout="constrained")
                _speedup_axes(figure.add_subplot(), cls, label, drafts, analysis, source)
                written[f"{_slug(cls.title)}-speedup-{label}"] = _save(figure, out_dir, f"{_slug(cls.title)}-speedup-{label}")
            if cls.load_points:
                figure = Figure(figsize=FIGSIZE, dpi=DPI, layout="constrained")
                left, right = figure.subplots(1, 2)
                _pareto_axes(left, cls, source)
                _percentile_axes(right, cls)
                written[f"{_slug(cls.title)}-load"] = _save(figure, out_dir, f"{_slug(cls.title)}-load")
    return written


def _save(figure: Any, out_dir: Path, name: str) -> Path:
    path = Path(out_dir) / f"{name}.png"
    figure.savefig(path, format="png", dpi=figure.dpi, metadata={"Software": None})
    return path


def _speedup_axes(ax: Any, cls: ClassAnalysis, label: str, drafts: Sequence[Any], analysis: SweepAnalysis, source: str) -> None:
    from specbench.analysis.theory import expected_speedup

    for index, draft in enumerate(drafts):
        color = f"C{index}"
        ks = [cp.k for cp in draft.points]
        for offset, (name, attr, marker) in enumerate((("TPOT", "tpot", "o"), ("E2E", "e2e", "s"))):
            intervals: list[Interval] = [getattr(cp, attr) for cp in draft.points]
            xs = [k + (offset - 0.5) * 0.15 for k in ks]
            ys = [i.point for i in intervals]
            below = [(i.point - i.low) if i.known else 0 for i in intervals]  # type: ignore[operator]
            above = [(i.high - i.point) if i.known else 0 for i in intervals]  # type: ignore[operator]
            ax.errorbar(xs, ys, yerr=[below, above], fmt=marker, color=color, capsize=3, label=f"{draft.draft_model} {name} measured")
        if draft.a is not None and draft.c is not None:
            grid = list(range(1, max(ks + [draft.model_optimum[0] if draft.model_optimum else 1]) + 2))
            ax.plot(
                grid,
                [expected_speedup(draft.a, k, draft.c) for k in grid],
                "--",
                color=color,
                label=f"{draft.draft_model} model (a={draft.a:.2f} from {draft.a_source}, c={draft.c:.3f})",
            )
        for cp in draft.points:
            ax.annotate(cp.variant, (cp.k, cp.tpot.point or 0), textcoords="offset points", xytext=(4, 6), fontsize=7)
    ax.axhline(1.0, color="#8c8c8c", linewidth=1)
    load = next((p.load.describe() for p in cls.load_points if p.load.label == label), label)
    ax.set_title(f"{cls.title}: speedup vs k at {load} (95% CI); {source}", fontsize=9)
    ax.set_xlabel("k (draft tokens per step)")
    ax.set_ylabel("speedup vs baseline (x)")
    ax.legend(fontsize=7)


def _pareto_axes(ax: Any, cls: ClassAnalysis, source: str) -> None:
    for variant in dict.fromkeys(p.variant for p in cls.load_points):
        mine = [
            p
            for p in cls.load_points
            if p.variant == variant and p.tokens_per_s_per_user is not None and p.tokens_per_s_per_node is not None
        ]
        ax.plot([p.tokens_per_s_per_node for p in mine], [p.tokens_per_s_per_user for p in mine], "o-", label=variant)
        for p in mine:
            ax.annotate(
                p.load.label, (p.tokens_per_s_per_node, p.tokens_per_s_per_user), textcoords="offset points", xytext=(4, 4), fontsize=7
            )
    front = sorted(cls.pareto, key=lambda p: p.tokens_per_s_per_node or 0)
    ax.plot([p.tokens_per_s_per_node for p in front], [p.tokens_per_s_per_user for p in front], ":", color="black", label="Pareto front")
    ax.set_title(f"{cls.title}: tokens/s per user vs per node, by load; {source}", fontsize=8)
    ax.set_xlabel("tokens/s per node")
    ax.set_ylabel("tokens/s per user (median)")
    ax.legend(fontsize=7)


def _percentile_axes(ax: Any, cls: ClassAnalysis) -> None:
    variants = list(dict.fromkeys(p.variant for p in cls.load_points))
    labels = list(dict.fromkeys(p.load.label for p in cls.load_points))
    for index, variant in enumerate(variants):
        by_label = {p.load.label: p for p in cls.load_points if p.variant == variant}
        for stat, style_ in (("p50", "-"), ("p90", ":")):
            xs = [i for i, label in enumerate(labels) if label in by_label and getattr(by_label[label].tpot, stat) is not None]
            ys = [getattr(by_label[labels[i]].tpot, stat) * 1000 for i in xs]
            ax.plot(xs, ys, style_ + "o", color=f"C{index}", label=f"{variant} TPOT {stat}")
            xs = [i for i, label in enumerate(labels) if label in by_label and getattr(by_label[label].ttft, stat) is not None]
            ys = [getattr(by_label[labels[i]].ttft, stat) * 1000 for i in xs]
            ax.plot(xs, ys, style_ + "^", color=f"C{index}", alpha=0.6, label=f"{variant} TTFT {stat}")
    ax.set_xticks(range(len(labels)), labels)
    ax.set_title(f"{cls.title}: TTFT and TPOT percentiles vs load (points: load levels)", fontsize=8)
    ax.set_xlabel("load level (c = in flight, r = requests/s)")
    ax.set_ylabel("ms")
    ax.legend(fontsize=6)


# --- dashboard -----------------------------------------------------------------------------------


def dashboard_widgets(analysis: SweepAnalysis, y: int = 0) -> list[dict[str, Any]]:
    """Text widgets: the recommendation table across the top, then per class the per-point bars
    (speedup per point and load as a bar of block characters, with the CI). Text only: a sweep's
    points need no extra metric (and no CloudWatch call) to be shown; PutDashboard takes up to 500
    widgets (REFERENCE.md), a sweep adds 1 + one per class."""
    metric = "TPOT" if analysis.metric == TPOT else "end-to-end"
    table = "\n".join(f"- {_md(line)}" for line in analysis.summary) or "- no data"
    # The cheapest configuration within the SLOs for the traffic mix, per load (over every TP).
    table += "".join(f"\n- cheapest within the SLOs {_md(ranking.text)}" for ranking in analysis.mix)
    widgets = [
        {
            "type": "text",
            "x": 0,
            "y": y,
            "width": 24,
            "height": 2 + len(analysis.summary) + len(analysis.mix),
            "properties": {"markdown": f"## Sweep {_md(analysis.sweep_id)}: recommendations ({metric} speedup)\n{table}"},
        }
    ]
    y += widgets[0]["height"]
    classes = list(analysis.classes)
    for row in range(0, len(classes), 2):  # two classes side by side, each row as tall as its taller one
        pair = [(cls, _bar_rows(cls, analysis.metric)) for cls in classes[row : row + 2]]
        height = min(3 + max(len(rows) for _, rows in pair), 1000)
        for column, (cls, rows) in enumerate(pair):
            markdown_ = f"### {_md(cls.title)}: speedup per point\n```\n" + "\n".join(rows) + "\n```"
            widgets.append({"type": "text", "x": 12 * column, "y": y, "width": 12, "height": height, "properties": {"markdown": markdown_}})
        y += height
    return widgets


def _bar_rows(cls: ClassAnalysis, metric: str) -> list[str]:
    entries = []
    for label, drafts in cls.curves.items():
        for draft in drafts:
            for cp in draft.points:
                entries.append((f"{label:>6} {cp.variant}", cp.tpot if metric == TPOT else cp.e2e))
    top = max((i.point for _, i in entries if i.point is not None), default=1.0) or 1.0
    width = max((len(name) for name, _ in entries), default=0)
    return [f"{name:<{width}} {'#' * round(MAX_BAR * (i.point or 0) / top):<{MAX_BAR}} {format_interval(i)}" for name, i in entries]


def _md(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


# --- everything ----------------------------------------------------------------------------------


def write_report(analysis: SweepAnalysis, out_dir: Path, charts: bool = True, staged: Sequence[Mapping[str, Any]] = ()) -> dict[str, Path]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    drawn = write_charts(analysis, out_dir) if charts else {}
    written = {
        "markdown": out_dir / "sweep-report.md",
        "json": out_dir / "sweep-analysis.json",
        "dashboard": out_dir / "sweep-widgets.json",
    }
    written["markdown"].write_text(markdown(analysis, {name: path.name for name, path in drawn.items()}, staged), encoding="utf-8")
    written["json"].write_text(jsonfile.dumps(analysis.to_dict(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    written["dashboard"].write_text(jsonfile.dumps({"widgets": dashboard_widgets(analysis)}, indent=2) + "\n", encoding="utf-8")
    return {**written, **drawn}
