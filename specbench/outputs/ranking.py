"""``specbench predict --rank``'s output: per load, the candidates ranked by cost per million output
tokens with their TPOT, TTFT and cost ranges, SLO status and Pareto mark, the notes each row rests
on, the refused candidates with their reasons, the HBM per rank of each, and what every row assumes;
as text lines and as JSON. The math is in specbench/analysis/{candidates,tp_range,ranking}.py; the
chart in ranking_chart.py."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from specbench.analysis.candidates import Candidate, RankMemory, Refusal
from specbench.analysis.ranking import LoadRanking, Price, Range, RankedRow, Slo

FORMAT = "specbench-ranking/1"
PARETO_NOTE = (
    "Pareto (cost vs TPOT): yes = on the front in every scenario of the ranges, maybe = in some, no = in none; "
    "SLO: meets = over the whole range, may break = within part of it, breaks = beyond all of it"
)


@dataclass(frozen=True)
class RankReport:
    target: str
    max_num_seqs: int
    max_model_len: int
    workload: tuple[int, int]  # prompt tokens, output tokens
    slo: Slo
    rankings: list[LoadRanking]
    refused: list[Refusal]
    prices: dict[str, Price]
    memory: list[tuple[Candidate, RankMemory]] = field(default_factory=list)  # the HBM per rank of each candidate served
    shared: list[str] = field(default_factory=list)  # what every row assumes


def _ms(r: Range) -> str:
    lo, hi = r.lo * 1e3, r.hi * 1e3
    return f"{lo:.1f}" if f"{lo:.1f}" == f"{hi:.1f}" else f"{lo:.1f}-{hi:.1f}"


def _ms0(r: Range) -> str:
    lo, hi = r.lo * 1e3, r.hi * 1e3
    return f"{lo:.0f}" if f"{lo:.0f}" == f"{hi:.0f}" else f"{lo:.0f}-{hi:.0f}"


def _money(r: Range | None) -> str:
    if r is None:
        return "no price"
    return f"{r.lo:.2f}" if f"{r.lo:.2f}" == f"{r.hi:.2f}" else f"{r.lo:.2f}-{r.hi:.2f}"


def _slo(row: RankedRow) -> str:
    return row.slo if not row.slo_detail else f"{row.slo} ({row.slo_detail})"


def _price(name: str, price: Price) -> str:
    return f"{name} {'no price' if price.per_hour is None else f'${price.per_hour:.4g}/node-hour'} ({price.source})"


HEADER = ("#", "instance", "LNC", "TP", "srv/node", "speculation", "TPOT ms", "TTFT ms", "$/M out tok", "SLO", "Pareto", "notes")


def _row_cells(row: RankedRow, notes: dict[str, int]) -> tuple[str, ...]:
    f = row.figures
    c = f.candidate
    refs = ",".join(str(n) for n in sorted(notes[a] for a in f.assumptions)) or "-"
    return (
        str(row.rank),
        c.deployment.node_type,
        str(c.deployment.lnc),
        str(c.tp),
        str(c.servers_per_node),
        c.speculation,
        _ms(f.tpot_s),
        _ms0(f.ttft_s),
        _money(row.cost),
        _slo(row),
        row.pareto,
        refs,
    )


def _table(rows: Sequence[tuple[str, ...]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    right = {0, 2, 3, 4}
    return [
        "  ".join(cell.rjust(w) if i in right else cell.ljust(w) for i, (cell, w) in enumerate(zip(r, widths, strict=True))).rstrip()
        for r in rows
    ]


def note_numbers(report: RankReport) -> dict[str, int]:
    """Each distinct row assumption, numbered in order of first use."""
    found: dict[str, int] = {}
    for ranking in report.rankings:
        for row in ranking.rows:
            for a in row.figures.assumptions:
                found.setdefault(a, len(found) + 1)
    return found


def render(report: RankReport) -> list[str]:
    prompt, output = report.workload
    lines = [
        f"ranking: {report.target}, max_num_seqs {report.max_num_seqs}, max_model_len {report.max_model_len}; "
        f"{prompt} prompt / {output} output tokens; SLO: {report.slo.describe()}",
        "prices: " + "; ".join(_price(name, p) for name, p in report.prices.items()),
    ]
    notes = note_numbers(report)
    if not report.rankings:
        lines += ["", f"no candidate can be served: all {len(report.refused)} are refused (below)"]
    for ranking in report.rankings:
        lines += ["", f"at {ranking.concurrency} client(s) in flight per server (ranked by the high end of $/M output tokens):"]
        lines += _table([HEADER, *(_row_cells(r, notes) for r in ranking.rows)])
        best = ranking.cheapest_meeting()
        if best is not None:
            lines.append(
                f"cheapest within the SLOs over its whole range: {best.figures.candidate.name} at ${_money(best.cost)}/M output tokens"
            )
        else:
            lines.append("no priced candidate meets the SLOs over its whole range at this load")
    lines += ["", PARETO_NOTE] if report.rankings else []
    if notes:
        lines += ["notes:"] + [f"  [{n}] {a}" for a, n in notes.items()]
    lines += ["", f"refused ({len(report.refused)}):" if report.refused else "refused: none (every candidate fits)"]
    lines += [f"  - {r.describe()}" for r in report.refused]
    if report.memory:
        lines += ["HBM per rank (GiB):"] + [f"  {c.name}: {m.describe()}" for c, m in report.memory]
    lines += ["assumptions (every row):"] + [f"  - {a}" for a in report.shared]
    return lines


def _range(r: Range | None) -> dict[str, float] | None:
    return None if r is None else {"lo": r.lo, "hi": r.hi}


def json_document(report: RankReport) -> dict[str, Any]:
    """The ranking as data (``ranking.json`` with ``--out``): every row's figures, provenance and assumptions."""
    from specbench.analysis.stats import json_safe

    def row(r: RankedRow) -> dict[str, Any]:
        f, c = r.figures, r.figures.candidate
        return {
            "rank": r.rank,
            "candidate": c.name,
            "instance_type": c.deployment.node_type,
            "lnc": c.deployment.lnc,
            "tensor_parallel_size": c.tp,
            "servers_per_node": c.servers_per_node,
            "stack": c.stack,
            "method": c.deployment.method,
            "draft": c.deployment.draft,
            "k": c.deployment.k,
            "tpot_s": _range(f.tpot_s),
            "ttft_s": _range(f.ttft_s),
            "tokens_per_s_per_node": _range(f.tokens_per_s_per_node),
            "cost_per_million_output_tokens": _range(r.cost),
            "price_per_hour": r.price.per_hour,
            "price_source": r.price.source,
            "slo": r.slo,
            "slo_detail": r.slo_detail,
            "pareto": r.pareto,
            "source": f.source,
            "provenance": f.provenance,
            "assumptions": list(f.assumptions),
        }

    return json_safe(
        {
            "format": FORMAT,
            "target": report.target,
            "max_num_seqs": report.max_num_seqs,
            "max_model_len": report.max_model_len,
            "workload": {"prompt_tokens": report.workload[0], "output_tokens": report.workload[1]},
            "slo": {"tpot_s": report.slo.tpot_s, "ttft_s": report.slo.ttft_s},
            "loads": [{"concurrency": lr.concurrency, "rows": [row(r) for r in lr.rows]} for lr in report.rankings],
            "refused": [{"candidate": r.name, "limit": r.limit, "reason": r.reason} for r in report.refused],
            "hbm_per_rank": [
                {"candidate": c.name, "total_bytes": m.total, "limit_bytes": m.limit, "text": m.describe()} for c, m in report.memory
            ],
            "assumptions": list(report.shared),
        }
    )
