"""The dashboard's top row, "Deployment state" (issue 36): each service's state, the Neuron
node-hours against the budget, and the sweep's stages done and planned.

Each figure comes from the one source that knows it:
- a service's state: the benchmark Job's own readiness wait (``load/endpoints.py`` ``wait_ready``),
  which publishes per service ``ServiceState`` (0 waiting, 1 ready, 2 failed) and
  ``ServiceWaitSeconds`` (since the Job began waiting; a ready service's is its time to ready) at
  most once a minute while it waits (``outputs/readiness.py``). From outside the pod the Job cannot
  tell a first start from a compilation (vLLM answers nothing until its engine is built), so the
  row adds Container Insights' pod status per service: Pending (no node yet, scheduling, pulling
  the image) against running but not ready (loading weights, compiling);
- node-hours: the cost guard's ``NeuronNodeHours`` and ``NeuronNodesUp`` (lambdas/cost_guard: it
  cannot import this package, so tests/test_deployment_state.py ties its names to these);
- the sweep: its stage documents and stored points under ``sweeps/<id>/`` in the results prefix.

Pure functions of figures the aggregation Lambda reads (lambdas/aggregate/handler.py); standard
library only (the Lambda ships it).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Protocol

# --- what is published, and under which names (one place: the publisher and the dashboard) ---------

SERVICE_STATE = "ServiceState"
SERVICE_WAIT = "ServiceWaitSeconds"
SERVICE_DIMENSION = "Variant"  # the benchmark's other metrics name a service this way too
WAITING, READY, FAILED = 0, 1, 2
STATE_NAMES = {WAITING: "waiting", READY: "ready", FAILED: "failed"}
PUBLISH_EVERY_S = 60.0  # while nothing changes; a change goes out at the next poll
# A waiting service with no report for this long: the Job stopped publishing (it ended, or was killed).
STALE_AFTER_S = 3 * PUBLISH_EVERY_S

# The cost guard's figures (lambdas/cost_guard/handler.py publishes them each budget check).
NODE_HOURS, NODES_UP, CLUSTER_DIMENSION = "NeuronNodeHours", "NeuronNodesUp", "ClusterName"

# Container Insights with enhanced observability, per pod: dimension set {ClusterName, Namespace,
# PodName}, PodName being the workload's name (the Deployment's, which is the service's name:
# charts/vllm.py). aws/amazon-cloudwatch-agent translator/translate/otel/exporter/awsemf/kubernetes.go
# getPodMetricDeclarations (pod_status_* only with enhanced_container_insights, which
# stacks/addons/container_insights.py sets); "PodName in Container Insights is the workload
# (Deployment, Daemonset, etc) name": plugins/processors/awsentity/internal/entityattributes/entityattributes.go;
# the metrics' reference: https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/Container-Insights-metrics-enhanced-EKS.html
CONTAINER_INSIGHTS = "ContainerInsights"
POD_PENDING, POD_RUNNING, POD_READY = "pod_status_pending", "pod_status_running", "pod_status_ready"
POD_STATUS = (POD_PENDING, POD_RUNNING, POD_READY)

# Where a sweep keeps its points and stage documents, under the results prefix
# (outputs/sweep_report.py SWEEPS_PREFIX, outputs/sweep_next.py STAGES; a test ties them).
SWEEPS_PREFIX, STAGES, STAGE_DOCUMENT = "sweeps/", "stages/", "after-stage-"
NO_SWEEP, GRID, STAGED = "none", "grid", "staged"  # SWEEP_STRATEGY of the Lambda's environment
MAX_SWEEPS_SHOWN = 3  # the newest ones

Key = tuple[str, str]  # (metric, service); service "" for the cluster's figures


def state_of(status: str | None, final: bool, other_model: bool) -> int:
    """A service's state from what the readiness wait last saw of it (None: ready): failed once the
    wait gave up (``final``) or when it answers but serves another model (waiting will not fix a
    configuration), else waiting."""
    if status is None:
        return READY
    return FAILED if final or other_model else WAITING


def state_datums(states: Mapping[str, tuple[int, float]], timestamp: datetime) -> list[dict[str, Any]]:
    """PutMetricData datums: per service (state, seconds waited), both under {Variant}."""
    datums = []
    for service, (state, waited_s) in sorted(states.items()):
        dimensions = [{"Name": SERVICE_DIMENSION, "Value": service}]
        datums.append(
            {"MetricName": SERVICE_STATE, "Dimensions": dimensions, "Timestamp": timestamp, "Value": float(state), "Unit": "None"}
        )
        waited = round(max(0.0, waited_s), 3) if math.isfinite(waited_s) else 0.0
        datums.append({"MetricName": SERVICE_WAIT, "Dimensions": dimensions, "Timestamp": timestamp, "Value": waited, "Unit": "Seconds"})
    return datums


# --- what the Lambda reads ------------------------------------------------------------------------


@dataclass(frozen=True)
class Figure:
    value: float
    at: datetime


def window(lookback_hours: int, now: datetime) -> tuple[datetime, datetime, int]:
    """The state's read window, the dashboard's lookback; its period keeps every query at 1440 data
    points at most (GetMetricData returns up to 100,800 per call: one call for 70 queries)."""
    period = 60 * max(1, math.ceil(lookback_hours * 60 / 1440))
    return now - timedelta(hours=lookback_hours), now + timedelta(minutes=1), period


def queries(namespace: str, cluster: str, serving_namespace: str, services: Sequence[str], period: int) -> list[tuple[Key, dict[str, Any]]]:
    """GetMetricData queries, Maximum per period: the Job's two figures and the pod's three per
    service, then the cost guard's two. (Maximum: within a period a wait ends in its highest state.)"""
    wanted: list[tuple[str, str, str, list[tuple[str, str]]]] = []
    for service in services:
        wanted += [(namespace, metric, service, [(SERVICE_DIMENSION, service)]) for metric in (SERVICE_STATE, SERVICE_WAIT)]
        pod = [("ClusterName", cluster), ("Namespace", serving_namespace), ("PodName", service)]
        wanted += [(CONTAINER_INSIGHTS, metric, service, pod) for metric in POD_STATUS]
    wanted += [(namespace, metric, "", [(CLUSTER_DIMENSION, cluster)]) for metric in (NODE_HOURS, NODES_UP)]
    out = []
    for index, (ns, metric, service, dims) in enumerate(wanted):
        metric_id = {"Namespace": ns, "MetricName": metric, "Dimensions": [{"Name": n, "Value": v} for n, v in dims]}
        out.append(((metric, service), {"Id": f"d{index}", "MetricStat": {"Metric": metric_id, "Period": period, "Stat": "Maximum"}}))
    return out


def latest(timestamps: Sequence[datetime], values: Sequence[float]) -> Figure | None:
    """The newest data point of a GetMetricData result, or None."""
    points = [(t, v) for t, v in zip(timestamps, values, strict=False) if isinstance(v, (int, float)) and math.isfinite(v)]
    if not points:
        return None
    at, value = max(points, key=lambda p: p[0])
    return Figure(float(value), at)


@dataclass(frozen=True)
class PointRun:
    """A stored sweep point as its run.json says: its folder (the point id), variant and status."""

    point: str
    variant: str
    status: str


@dataclass(frozen=True)
class StageRow:
    stage: int
    variants: tuple[str, ...]
    planned: int | None  # points; None: not known (a sweep started with other settings)
    completed: int
    running: int
    other: int  # stored, neither completed nor running (failed, interrupted, not ready)
    decisions: str
    node_hours: float | None  # planned
    state: str


@dataclass(frozen=True)
class SweepProgress:
    sweep_id: str
    strategy: str
    rows: tuple[StageRow, ...] = ()
    total: str = ""
    outcome: str = ""
    problems: tuple[str, ...] = ()
    last_change: datetime | None = None


@dataclass(frozen=True)
class Deployment:
    """Everything the row shows, as one refresh of the Lambda read it."""

    now: datetime
    services: tuple[str, ...]
    figures: Mapping[Key, Figure] = field(default_factory=dict)
    sweeps: tuple[SweepProgress, ...] = ()
    sweep_strategy: str = NO_SWEEP
    first_job_points: int = 0
    first_job_node_hours: float = 0.0
    error: str = ""  # what could not be read, said in the row
    # The read's period: a figure's time is its period's start (GetMetricData), up to this much early.
    period_s: int = 60


def parse_stage_document(text: str) -> dict[str, Any] | str:
    """A stage document (outputs/sweep_next.py writes it), or why it is not one."""
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as error:
        return f"not JSON ({error})"
    if not (isinstance(doc, dict) and type(doc.get("after_stage")) is int and isinstance(doc.get("decisions"), dict)):
        return "not a stage document (after_stage, decisions)"
    if not isinstance(doc.get("next_stage") or {}, dict) or not isinstance(doc.get("node_hours") or {}, dict):
        return "not a stage document (next_stage, node_hours)"
    return doc


def sweep_progress(
    sweep_id: str,
    points: Sequence[PointRun],
    documents: Sequence[Mapping[str, Any]],
    configured: tuple[str, int, float] = (NO_SWEEP, 0, 0.0),
    problems: Sequence[str] = (),
    last_change: datetime | None = None,
) -> SweepProgress:
    """A sweep's stages: stage 1 (the sweep's first Job: the grid, or a staged sweep's first
    stage), then every stage a document proposed. ``configured``: the deployment's strategy and its
    first Job's points and node-hours, which stand for stage 1's plan when no document says it."""
    docs = sorted(documents, key=lambda d: d["after_stage"])
    strategy = STAGED if docs or configured[0] == STAGED else GRID
    proposed = [(d["next_stage"], d) for d in docs if (d.get("next_stage") or {}).get("stage")]
    later = {p for nxt, _ in proposed for p in nxt.get("points") or []}
    after = {d["after_stage"]: d for d in docs}
    by_point = {p.point: p for p in points}
    first = [p for p in points if p.point not in later]
    planned_one = configured[1] if configured[0] == strategy and configured[1] else None
    hours_one = (docs[0].get("node_hours") or {}).get("stage_one") if docs else (configured[2] if planned_one else None)
    rows = [_row(1, first, planned_one, after.get(1), hours_one)]
    for nxt, doc in proposed:
        stored = [by_point[p] for p in nxt.get("points") or [] if p in by_point]
        names = tuple(str(v.get("name", "?")) for v in nxt.get("variants") or [] if isinstance(v, dict))
        row = _row(int(nxt["stage"]), stored, len(nxt.get("points") or []), after.get(int(nxt["stage"])), _number(doc, "next_stage"), names)
        if not stored and _over_budget(doc):
            row = replace(row, state="not started: over sweep.budget_node_hours")
        rows.append(row)
    last = docs[-1] if docs else None
    outcome = ""
    if last is not None and not (last.get("next_stage") or {}).get("stage"):
        outcome = f"every decision is made after stage {last['after_stage']}"
    total = _total(last.get("node_hours") or {}) if last is not None else ""
    return SweepProgress(sweep_id, strategy, tuple(rows), total, outcome, tuple(problems), last_change)


def _row(
    stage: int,
    stored: Sequence[PointRun],
    planned: int | None,
    decided: Mapping[str, Any] | None,
    node_hours: float | None,
    names: tuple[str, ...] = (),
) -> StageRow:
    completed = sum(1 for p in stored if p.status == "completed")
    running = sum(1 for p in stored if p.status == "running")
    other = len(stored) - completed - running
    if decided is not None:
        state = "done"
    elif running:
        state = "running"
    elif planned and completed >= planned:
        state = "measured: to be decided"
    elif not stored:
        state = "not started"
    else:  # the rest not stored yet, or never: the Job's state says which (kubectl get jobs)
        state = f"partly measured ({len(stored)} of {planned if planned else '?'} stored)"
    variants = names or tuple(dict.fromkeys(p.variant for p in sorted(stored, key=lambda p: p.point)))
    return StageRow(stage, variants, planned, completed, running, other, _decisions(decided), node_hours, state)


def _decisions(doc: Mapping[str, Any] | None) -> str:
    """The decisions after a stage, per load: ``c1 decided: X; c4 open (2 not ruled out)``."""
    if doc is None:
        return "-"
    parts = []
    for load, d in sorted((doc.get("decisions") or {}).items()):
        if not isinstance(d, dict):
            continue
        if d.get("made"):
            parts.append(f"{load} decided: {d.get('best')}")
        else:
            parts.append(f"{load} open ({len(d.get('undecided') or [])} not ruled out)")
    return "; ".join(parts) or "-"


def _number(doc: Mapping[str, Any], key: str) -> float | None:
    value = (doc.get("node_hours") or {}).get(key)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) else None


def _over_budget(doc: Mapping[str, Any]) -> bool:
    """The controller's rule (outputs/sweep_controller.py): a stage that would take the sweep over its budget is not started."""
    budget, so_far = _number(doc, "budget"), _number(doc, "so_far")
    return bool(budget) and so_far is not None and budget is not None and so_far > budget * (1 + 1e-9)


def _total(hours: Mapping[str, Any]) -> str:
    """The last document's running total against the plan synth printed (sweep_next.node_hours_total's words)."""
    doc = {"node_hours": hours}
    so_far = _number(doc, "so_far")
    if so_far is None:
        return ""
    names = (("expected", "expected"), ("worst", "worst case"), ("budget", "sweep budget"))
    plan = [f"{name} {value:.1f}" for key, name in names if (value := _number(doc, key))]
    return f"{so_far:.1f} node-hours planned so far" + (f" (plan: {', '.join(plan)})" if plan else "")


# --- the row --------------------------------------------------------------------------------------


class RowSettings(Protocol):
    """What the row needs of the dashboard's settings (outputs/dashboard.py DashboardSettings)."""

    region: str
    metrics_namespace: str
    cluster_name: str
    serving_namespace: str
    lookback_hours: int
    budget_node_hours: float
    profile: str


def title_prefix(s: RowSettings) -> str:
    """The rehearsal's label (analysis/aggregate.py title_prefix says the same of a run)."""
    return "REHEARSAL: " if s.profile == "rehearsal" else ""


def md(text: Any) -> str:
    """Markdown-safe text (as outputs/dashboard.py's): table pipes and emphasis escaped, one line."""
    return re.sub(r"([|*_`\[\]<>\\])", r"\\\1", str(text)).replace("\n", " ")


def row(deployment: Deployment | None, s: RowSettings) -> list[tuple[int, int, dict[str, Any]]]:
    """The row's widgets as (width, height, widget): the state table beside the node-hours and wait
    graphs, then the sweep's stages beside the pods' status. None: not read yet (the stack's first body)."""
    state = services_markdown(deployment, s)
    sweep = sweep_markdown(deployment, s)
    top = max(6, 3 + state.count("\n"))
    bottom = max(6, 3 + sweep.count("\n"))
    return [
        (12, top, _text(state)),
        (6, top, node_hours_graph(s)),
        (6, top, wait_graph(s)),
        (16, bottom, _text(sweep)),
        (8, bottom, pods_graph(s)),
    ]


def services_markdown(deployment: Deployment | None, s: RowSettings) -> str:
    lines = [f"## {md(title_prefix(s))}Deployment state"]
    if deployment is None:
        lines.append(
            "Not read yet: the aggregation Lambda fills in each service's state, the node-hours and the sweep's stages "
            "on its next refresh. The graphs beside are live."
        )
        return "\n\n".join(lines)
    lines.append(f"As of {_when(deployment.now)} (this refresh); the graphs beside are live.")
    if deployment.error:
        lines.append(f"**Not everything could be read:** {md(deployment.error)}")
    table = ["| service | benchmark Job's wait | pod (Container Insights) |", "|---|---|---|"]
    for service in deployment.services:
        table.append(f"| {md(service)} | {_job_cell(deployment, service)} | {_pod_cell(deployment, service)} |")
    lines.append("\n".join(table))
    lines.append(_node_hours_line(deployment, s))
    return "\n\n".join(lines)


def _job_cell(d: Deployment, service: str) -> str:
    state, waited = d.figures.get((SERVICE_STATE, service)), d.figures.get((SERVICE_WAIT, service))
    if state is None:
        return "no report in the window (the benchmark Job publishes one while it waits for the services)"
    took = _duration(waited.value) if waited else "?"
    seen = f"{_ago(state.at, d.now)}"
    if state.value == READY:
        return f"**ready** after {took} ({seen})"
    if state.value == FAILED:
        return f"**failed** after {took} waiting: the Job's ready timeout, or the endpoint serves another model ({seen}; see the Job's log)"
    if (d.now - state.at).total_seconds() > STALE_AFTER_S + d.period_s:
        return f"waiting {took} when last reported, {seen}: the Job stopped reporting (it ended or was stopped)"
    return f"**waiting** {took}: not answering yet (first start or compiling) ({seen})"


def _pod_cell(d: Deployment, service: str) -> str:
    found = {m: d.figures.get((m, service)) for m in POD_STATUS}
    seen = [f for f in found.values() if f is not None]
    if not seen:
        return "no figure (Container Insights publishes none for this pod)"
    when = _ago(max(f.at for f in seen), d.now)
    if found[POD_READY] and found[POD_READY].value >= 1:
        return f"ready ({when})"
    if found[POD_RUNNING] and found[POD_RUNNING].value >= 1:
        return f"running, not ready: loading weights or compiling ({when})"
    if found[POD_PENDING] and found[POD_PENDING].value >= 1:
        return f"pending: no Neuron node yet, being scheduled, or pulling its image ({when})"
    return f"not running ({when})"


def _node_hours_line(d: Deployment, s: RowSettings) -> str:
    hours, up = d.figures.get((NODE_HOURS, "")), d.figures.get((NODES_UP, ""))
    nodes = f" · Neuron nodes up: {up.value:g}" if up else ""
    if hours is None:
        return f"Neuron node-hours: no figure in the last {s.lookback_hours} h (the cost guard publishes one each budget check){nodes}"
    budget = s.budget_node_hours
    if budget > 0:
        share = hours.value / budget
        over = " **over budget: the cost guard keeps the Neuron node group at 0**" if share >= 1 else ""
        spent = f"**Neuron node-hours: {hours.value:.1f} of {budget:g}** ({share:.0%} of budget.node_hours){over}"
    else:
        spent = f"**Neuron node-hours: {hours.value:.1f}** (no budget: budget.node_hours = 0)"
    return f"{spent}{nodes} · cost guard's last check {_ago(hours.at, d.now)}"


def sweep_markdown(deployment: Deployment | None, s: RowSettings) -> str:
    title = f"## {md(title_prefix(s))}Sweep stages"
    if deployment is None:
        return title + "\n\nNot read yet (the aggregation Lambda reads the stage documents on its next refresh)."
    configured = deployment.sweep_strategy
    if not deployment.sweeps:
        if configured == NO_SWEEP:
            return title + "\n\nNo sweep configured (`sweep.variants` is empty) and none stored: nothing done, nothing planned."
        return (
            f"{title}\n\nA {configured} sweep is configured (its first Job: {deployment.first_job_points} points, "
            f"{deployment.first_job_node_hours:.1f} node-hours planned); none is stored under `{SWEEPS_PREFIX}` yet: not started."
        )
    parts = [title]
    for sweep in deployment.sweeps:
        changed = f", last change {_ago(sweep.last_change, deployment.now)}" if sweep.last_change else ""
        parts.append(f"Sweep `{md(sweep.sweep_id)}` ({sweep.strategy}{changed})")
        table = [
            "| stage | ran | points completed / planned | decisions after it | node-hours planned | state |",
            "|---|---|---|---|---|---|",
        ]
        for r in sweep.rows:
            stored = f"{r.completed} / {r.planned if r.planned is not None else '?'}"
            extra = [f"{r.running} running"] if r.running else []
            extra += [f"{r.other} failed or stopped"] if r.other else []
            cells = (
                str(r.stage),
                md(", ".join(r.variants) or "-"),
                stored + (f" ({', '.join(extra)})" if extra else ""),
                md(r.decisions),
                "-" if r.node_hours is None else f"{r.node_hours:.1f}",
                md(r.state),
            )
            table.append("| " + " | ".join(cells) + " |")
        parts.append("\n".join(table))
        notes = [x for x in (sweep.outcome, sweep.total) if x] + [f"unreadable: {p}" for p in sweep.problems[:3]]
        if notes:
            parts.append(md("; ".join(notes)))
    if configured == NO_SWEEP:
        parts.append("No sweep is configured now: these are stored sweeps of earlier settings.")
    return "\n\n".join(parts)


def _text(markdown: str) -> dict[str, Any]:
    return {"type": "text", "properties": {"markdown": markdown}}


def _graph(s: RowSettings, title: str, metrics: list[list[Any]], **properties: Any) -> dict[str, Any]:
    return {
        "type": "metric",
        "properties": {"title": title_prefix(s) + title, "region": s.region, "metrics": metrics, "view": "timeSeries", **properties},
    }


def node_hours_graph(s: RowSettings) -> dict[str, Any]:
    """NeuronNodeHours (left) against the budget as a horizontal line, NeuronNodesUp (right)."""
    dims = [CLUSTER_DIMENSION, s.cluster_name]
    metrics = [
        [s.metrics_namespace, NODE_HOURS, *dims, {"stat": "Maximum", "label": "node-hours"}],
        [s.metrics_namespace, NODES_UP, *dims, {"stat": "Maximum", "label": "nodes up", "yAxis": "right"}],
    ]
    budget = [{"value": s.budget_node_hours, "label": f"budget {s.budget_node_hours:g} (budget.node_hours)", "color": "#d62728"}]
    annotations = {"horizontal": budget} if s.budget_node_hours > 0 else {}
    return _graph(s, "Neuron node-hours against the budget", metrics, stat="Maximum", period=900, annotations=annotations)


def wait_graph(s: RowSettings) -> dict[str, Any]:
    """Every service's ServiceWaitSeconds, found with SEARCH (a service added later appears). The
    namespace in double quotes: https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/search-expression-syntax.html
    (a name with characters other than letters and digits goes in double quotes)."""
    search = f"SEARCH('{{\"{s.metrics_namespace}\",{SERVICE_DIMENSION}}} MetricName=\"{SERVICE_WAIT}\"', 'Maximum', 60)"
    return _graph(
        s, "Benchmark Job's wait per service (s): rising while it waits", [[{"expression": search, "id": "wait", "label": ""}]], period=60
    )


def pods_graph(s: RowSettings) -> dict[str, Any]:
    pods = f'{{{CONTAINER_INSIGHTS},ClusterName,Namespace,PodName}} ClusterName="{s.cluster_name}" Namespace="{s.serving_namespace}"'
    names = " OR ".join(f'MetricName="{m}"' for m in POD_STATUS)
    search = f"SEARCH('{pods} ({names})', 'Maximum', 60)"
    return _graph(s, "Serving pods: pending, running, ready (1 = yes)", [[{"expression": search, "id": "pods", "label": ""}]], period=60)


def _when(at: datetime) -> str:
    return at.strftime("%Y-%m-%d %H:%M UTC")


def _ago(at: datetime | None, now: datetime) -> str:
    if at is None:
        return "?"
    seconds = (now - at).total_seconds()
    return f"{at.strftime('%H:%M UTC')}, {_duration(seconds)} ago" if seconds >= 60 else f"{at.strftime('%H:%M UTC')}"


def _duration(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes = int(seconds // 60)
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min" if hours < 48 else f"{hours // 24} days"


def services_in(names: Iterable[str]) -> tuple[str, ...]:
    """The SERVICES variable (comma-separated, in the deployment's order) as names, empties dropped."""
    return tuple(dict.fromkeys(n.strip() for n in names if n.strip()))
