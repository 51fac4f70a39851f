"""The cost-latency chart of ``specbench predict --rank --out DIR``: per load, every priced candidate at
(TPOT, $/M output tokens) with its ranges as error bars, the Pareto front marked, the TPOT SLO as a
line. matplotlib's Agg backend, the report's style (specbench/outputs/report_charts.py): the same
bytes for the same ranking. Needs matplotlib (``pip install -r specbench/requirements-report.txt``);
only ``predict --rank --out`` imports it."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # before anything imports pyplot: no display needed, same pixels everywhere

from matplotlib import style  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: E402

from specbench.analysis.ranking import MAYBE_ON_FRONT, ON_FRONT, LoadRanking, RankedRow, Slo  # noqa: E402
from specbench.outputs.report_charts import DPI, RC  # noqa: E402

PARETO_CHART = "pareto"
PANEL_SIZE = (5.5, 5.0)  # inches per load
MARKERS = {ON_FRONT: ("o", "#1f77b4", "on the front"), MAYBE_ON_FRONT: ("o", "#ff7f0e", "on the front in some scenarios")}
OFF = ("o", "#8c8c8c", "off the front")


def _label(row: RankedRow) -> str:
    c = row.figures.candidate
    return f"TP{c.tp} {'base' if not c.deployment.method else f'k{c.deployment.k}'}"


def _labels(rows: list[RankedRow]) -> dict[int, str]:
    """One label per drawn position: rows at the same place (the same figures on two instance sizes)
    share one, their sizes joined (``3xlarge/48xlarge TP4 k7``); the first row of each place gets it."""
    places: dict[tuple, list[RankedRow]] = {}
    for row in rows:
        f, cost = row.figures, row.cost
        assert cost is not None
        key = (round(f.tpot_s.lo, 6), round(f.tpot_s.hi, 6), round(cost.lo, 4), round(cost.hi, 4), _label(row))
        places.setdefault(key, []).append(row)
    found = {}
    for group in places.values():
        sizes = "/".join(dict.fromkeys(r.figures.candidate.deployment.node_type.partition(".")[2] for r in group))
        found[id(group[0])] = f"{sizes} {_label(group[0])}"
    return found


def write_pareto_chart(rankings: list[LoadRanking], slo: Slo, out_dir: Path) -> Path | None:
    """``<out_dir>/pareto.png``: one panel per load; None when no row has a price (nothing to place)."""
    priced = [[r for r in lr.rows if r.cost is not None] for lr in rankings]
    if not any(priced):
        return None
    with style.context("default"), matplotlib.rc_context({**RC, "axes.grid.axis": "both"}):
        figure = Figure(figsize=(PANEL_SIZE[0] * len(rankings), PANEL_SIZE[1]), dpi=DPI, layout="constrained")
        axes = figure.subplots(1, len(rankings), squeeze=False)[0]
        for ax, ranking, rows in zip(axes, rankings, priced, strict=True):
            seen: set[str] = set()
            labels = _labels(rows)
            for row in rows:
                marker, color, name = MARKERS.get(row.pareto, OFF)
                f, cost = row.figures, row.cost
                assert cost is not None
                x, y = (f.tpot_s.lo + f.tpot_s.hi) / 2 * 1e3, (cost.lo + cost.hi) / 2
                ax.errorbar(
                    [x],
                    [y],
                    xerr=[[x - f.tpot_s.lo * 1e3], [f.tpot_s.hi * 1e3 - x]],
                    yerr=[[y - cost.lo], [cost.hi - y]],
                    fmt=marker,
                    color=color,
                    ecolor=color,
                    elinewidth=1,
                    capsize=3,
                    label=None if name in seen else name,
                )
                seen.add(name)
                if id(row) in labels:
                    ax.annotate(labels[id(row)], (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
            if slo.tpot_s is not None:
                ax.axvline(slo.tpot_s * 1e3, color="#d62728", linestyle="--", linewidth=1, label=f"TPOT SLO {slo.tpot_s * 1e3:g} ms")
            ax.set_yscale("log")
            ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))  # no mathtext: RC parses none
            ax.yaxis.set_minor_formatter(NullFormatter())
            ax.set_title(f"{ranking.concurrency} client(s) in flight per server")
            ax.set_xlabel("TPOT of the slowest class, ms (bars: the TP range)")
            ax.set_ylabel("USD per million output tokens (log)")
            ax.legend(loc="lower right", fontsize=7)
        path = Path(out_dir) / f"{PARETO_CHART}.png"
        figure.savefig(path, format="png", dpi=DPI, metadata={"Software": None})
    return path
