"""A stored run's answer to "how much faster is speculative decoding, how sure are we, and why":
per test case and per prompt class, each service's latency distributions, each speculative
service's speedups over the baseline with bootstrap confidence intervals, its draft acceptance,
and the speedup the standard model expects from that acceptance.

Pure functions of the run's files (run.json, records, acceptance figures); the aggregation Lambda,
the ``report`` command and the demo all call ``summarize_run``. Standard library only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from specbench.analysis import cost, loads, stats, stream_acceptance, theory
from specbench.results.records import RequestRecord, error_kinds


@dataclass(frozen=True)
class LatencyMetric:
    name: str  # the CloudWatch metric name (specbench.outputs.cloudwatch.METRICS)
    attribute: str  # the RequestRecord field
    title: str


# In the order the reference figures show them; TPOT is the per-token decode time the model predicts.
LATENCY_METRICS: tuple[LatencyMetric, ...] = (
    LatencyMetric("EndToEndLatency", "end_to_end_latency_s", "End-to-end latency"),
    LatencyMetric("InterTokenLatency", "inter_token_latency_s", "Inter-token latency (per chunk, llmperf's definition)"),
    LatencyMetric("TTFT", "ttft_s", "Time to first token"),
    LatencyMetric("TimePerOutputToken", "time_per_output_token_s", "Time per output token"),
)
METRIC_NAMES = tuple(metric.name for metric in LATENCY_METRICS)
# The speedup the standard model speaks to: target steps saved per generated token.
MODEL_METRIC = "TimePerOutputToken"
# The speedup a user sees for a whole answer.
HEADLINE_METRIC = "EndToEndLatency"
# Speedup tables' column order: the whole answer, per token (what the model predicts), per chunk, first token.
SPEEDUP_ORDER = (HEADLINE_METRIC, MODEL_METRIC, "InterTokenLatency", "TTFT")

COMPLETE, PARTIAL, NO_DATA = "complete", "partial", "no data"
# run.json statuses of a run that will not grow: the runner's, and specbench import-llmperf's.
FINISHED = ("completed", "imported")


@dataclass(frozen=True)
class VariantStats:
    variant: str
    requests: int
    errors: int
    distributions: dict[str, stats.Distribution]  # metric name -> successful requests' values
    medians: dict[str, stats.Interval]  # metric name -> median with its bootstrap CI (error bars)
    tokens_per_chunk: stats.Distribution
    acceptance: dict[str, Any] | None  # pooled acceptance figures; None for a service that does not speculate
    # Acceptance measured from the stream (analysis.stream_acceptance.figure): source "stream", the
    # self-check's verdict and reason, CIs, histogram; None for the baseline.
    stream_acceptance: dict[str, Any] | None = None
    # Output tokens per second per server and per node while busy, and the cost of a million of them,
    # per load level of the run (analysis.cost): one entry a level.
    throughput: list[cost.Throughput] = field(default_factory=list)

    @property
    def error_rate(self) -> float | None:
        return self.errors / self.requests if self.requests else None


@dataclass(frozen=True)
class LevelComparison:
    """One speculative service against the baseline, in one group, at one load level."""

    level: str  # the load level's label (c4, r2p5): per server (analysis.loads)
    speedups: dict[str, stats.Interval]  # metric name -> baseline median / speculative median at this level
    requests: tuple[int, int]  # requests at this level (failed ones included): baseline, speculative

    @property
    def headline(self) -> stats.Interval:
        return self.speedups[HEADLINE_METRIC]


@dataclass(frozen=True)
class Comparison:
    """One speculative service against the baseline, in one group."""

    variant: str
    num_speculative_tokens: int | None
    speedups: dict[str, stats.Interval]  # metric name -> baseline median / speculative median
    acceptance: theory.AcceptanceEstimate
    expected_speedup: float | None  # S(a, k, c) for the time per output token
    implied_cost_ratio: float | None  # the c that would explain the measured TPOT speedup
    # True: the measured TPOT speedup's whole CI lies below the expected speedup.
    shortfall: bool | None
    # Where the acceptance behind the theory came from: "metrics" (/metrics), "stream" (when /metrics
    # has nothing and the stream passed its self-check) or "missing"; and both sources side by side.
    acceptance_source: str = "missing"
    cross_check: dict[str, Any] = field(default_factory=dict)
    # Per load level: the saving in cost per million output tokens, baseline - speculative (None: no price).
    savings: list[cost.Saving | None] = field(default_factory=list)
    # A run at several load levels: the speedups per level, in load order (``speedups`` pools them,
    # which answers no load: the verdict and the decision tables use these). Empty at one level.
    levels: list[LevelComparison] = field(default_factory=list)

    @property
    def headline(self) -> stats.Interval:
        return self.speedups[HEADLINE_METRIC]


@dataclass(frozen=True)
class Group:
    name: str
    kind: str  # "test case" | "prompt class"
    prompt_class: str
    variants: dict[str, VariantStats]
    comparisons: list[Comparison]
    outputs_match: bool | None = None  # test cases only: all successful outputs identical
    complete: bool = True


@dataclass(frozen=True)
class RunSummary:
    run_id: str
    status: str  # the run's own status (run.json): completed | running | failed | ...
    completeness: str  # complete | partial | no data
    baseline: str
    speculative: list[str]
    test_cases: list[Group]
    prompt_classes: list[Group]
    expected_test_cases: list[str]
    missing_test_cases: list[str]
    settings: dict[str, Any] = field(default_factory=dict)  # what was deployed (run.json plan.deployment)
    parameters: dict[str, Any] = field(default_factory=dict)  # the load: tokens, concurrency, requests
    started: str = ""
    finished: str = ""
    draft_cost_ratio: float = 0.1
    verdict: str = ""
    notes: list[str] = field(default_factory=list)
    # The node price the costs use and where it came from; servers per node and how they were found;
    # the goodput SLOs (ms); the load levels in the order they ran.
    price: cost.NodePrice = field(default_factory=lambda: cost.NodePrice(None))
    servers_per_node: int = 1
    servers_per_node_source: str = ""
    slo: dict[str, float | None] = field(default_factory=dict)
    levels: list[str] = field(default_factory=list)
    # Services of the run without one usable request -> why (none stored, every request failed, ...).
    missing_services: dict[str, str] = field(default_factory=dict)
    # What the readers left out and why (specbench.results.runfiles.data_quality); empty: not read from files.
    data_quality: dict[str, Any] = field(default_factory=dict)
    # Failed requests per service and kind (records.ERROR_KINDS): left out of every figure, counted here.
    failures: dict[str, dict[str, int]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return stats.json_safe(asdict(self))

    def group(self, name: str) -> Group:
        for group in (*self.test_cases, *self.prompt_classes):
            if group.name == name:
                return group
        raise KeyError(name)


# --- building it ---------------------------------------------------------------------------------


def summarize_run(
    run: Mapping[str, Any] | None,
    records: Sequence[RequestRecord],
    acceptance: Mapping[str, Mapping[str, Mapping[str, Any]]],
    *,
    baseline: str | None = None,
    draft_cost_ratio: float = 0.1,
    resamples: int = 2000,
    confidence: float = 0.95,
    price: cost.NodePrice | None = None,
    servers_per_node: int | None = None,
    data_quality: Mapping[str, Any] | None = None,
) -> RunSummary:
    """Summarize one run. ``acceptance`` is test case -> endpoint -> figures (acceptance/<case>.json).
    ``price`` overrides the node price the run's settings recorded (``cost.node_price_per_hour``);
    ``servers_per_node`` the servers per node they recorded; ``data_quality`` what the readers left
    out (specbench.results.runfiles.RunFiles.quality)."""
    run = run or {}
    plan = run.get("plan") or {}
    deployment = plan.get("deployment") or {}
    node_price = price if price is not None else cost.recorded_price(deployment, str(run.get("started") or ""))
    if servers_per_node is not None:
        servers, servers_source = servers_per_node, "given"
    else:
        servers, servers_source = cost.recorded_servers_per_node(deployment)
    slo = _slo_of(deployment)
    default_level = _default_level(plan)
    variants = _variant_order(plan, deployment, records)
    base = baseline or _baseline_of(deployment, plan, variants)
    speculative = [v for v in variants if v != base]
    k_of = {v["name"]: v.get("num_speculative_tokens") for v in deployment.get("variants", []) if isinstance(v, dict) and "name" in v}
    expected_cases, class_of = _planned_cases(plan, records)
    expected_requests = _expected_requests(plan)
    options = {"resamples": resamples, "confidence": confidence}
    economics = _Economics(records, node_price, servers, slo, default_level)
    builder = _GroupBuilder(base, speculative, k_of, draft_cost_ratio, expected_requests, options, economics)

    by_case = _group_by(records, lambda r: r.test_case)
    present = [case for case in expected_cases if case in by_case] + sorted(set(by_case) - set(expected_cases))

    def figures_of(members: Sequence[str]) -> list[Mapping[str, Any]]:
        return [f for case in members for f in case_acceptance(acceptance, case, economics.levels)]

    cases = [
        builder.build(case, "test case", class_of.get(case) or by_case[case][0].prompt_class, by_case[case], figures_of([case]), 1)
        for case in present
    ]
    classes = []
    for prompt_class in _unique(class_of.get(case) or by_case[case][0].prompt_class for case in present):
        members = [case for case in present if (class_of.get(case) or by_case[case][0].prompt_class) == prompt_class]
        pooled = [record for case in members for record in by_case[case]]
        classes.append(builder.build(prompt_class, "prompt class", prompt_class, pooled, figures_of(members), len(members)))

    missing = [case for case in expected_cases if case not in by_case]
    quality = dict(data_quality or {})
    gaps = service_gaps([base, *speculative], records, quality.get("by_service") or {})
    if not records:
        completeness = NO_DATA
    elif missing or gaps or run_damaged(quality) or run.get("status", "completed") not in FINISHED or not all(g.complete for g in cases):
        completeness = PARTIAL
    else:
        completeness = COMPLETE
    summary = RunSummary(
        run_id=str(run.get("run_id") or (records[0].run_id if records else "")),
        status=str(run.get("status", "unknown")),
        completeness=completeness,
        baseline=base,
        speculative=speculative,
        test_cases=cases,
        prompt_classes=classes,
        expected_test_cases=expected_cases,
        missing_test_cases=missing,
        settings=dict(deployment),
        parameters=_parameters(plan),
        started=str(run.get("started", "")),
        finished=str(run.get("finished", "")),
        draft_cost_ratio=draft_cost_ratio,
        notes=_notes(run, cases, missing) + _quality_notes(quality),
        price=node_price,
        servers_per_node=servers,
        servers_per_node_source=servers_source,
        slo=slo,
        levels=economics.levels,
        missing_services=gaps,
        data_quality=quality,
        failures={v: kinds for v, mine in _group_by(records, lambda r: r.variant).items() if (kinds := error_kinds(mine))},
    )
    return _with_verdict(summary)


class _Economics:
    """Every request's busy share, computed per server over all of its records (a share depends on
    what else that server had in flight), and the settings the cost figures use."""

    def __init__(
        self, records: Sequence[RequestRecord], price: cost.NodePrice, servers: int, slo: Mapping[str, float | None], level: str
    ) -> None:
        self.price, self.servers, self.slo, self.default_level = price, servers, slo, level
        self.share_of: dict[int, cost.Share] = {}
        for mine in _group_by(records, lambda r: r.variant).values():
            timed = [r for r in mine if cost.window(r) is not None]
            for record, share in zip(timed, cost.shares(timed, slo.get("ttft_ms"), slo.get("tpot_ms")), strict=True):
                self.share_of[id(record)] = share
        self.levels = loads.in_load_order(cost.group_levels(records, level))

    @property
    def has_slo(self) -> bool:
        return self.slo.get("ttft_ms") is not None or self.slo.get("tpot_ms") is not None

    def items(self, records: Sequence[RequestRecord], level: str) -> list[cost.Share]:
        return [self.share_of[id(r)] for r in records if id(r) in self.share_of and cost.level_label(r, self.default_level) == level]

    def group_levels(self, records: Sequence[RequestRecord]) -> list[str]:
        return [level for level in self.levels if any(cost.level_label(r, self.default_level) == level for r in records)]


def case_acceptance(acceptance: Mapping[str, Mapping[str, Any]], case: str, levels: Sequence[str]) -> list[Mapping[str, Any]]:
    """A test case's acceptance files: ``<case>`` (one level), and ``<case>@<level>`` for each level
    of a run at several (specbench.runner names a case's files so); [{}] when there are none."""
    found = [acceptance[key] for key in (case, *(f"{case}@{level}" for level in levels)) if key in acceptance]
    return found or [{}]


def _expected_requests(plan: Mapping[str, Any]) -> int | None:
    """Requests each service should have per test case: the load's, at each of the run's levels."""
    levels = [level for level in plan.get("load_levels") or [] if isinstance(level, Mapping)]
    if levels and all(isinstance(level.get("requests"), int) for level in levels):
        return sum(level["requests"] for level in levels)
    return (plan.get("load") or {}).get("requests")


def _slo_of(deployment: Mapping[str, Any]) -> dict[str, float | None]:
    """The goodput SLOs (ms) the run's settings recorded: ``cost.slo``, else ``sweep.slo``; none."""
    recorded = ((deployment.get("cost") or {}).get("slo")) or ((deployment.get("sweep") or {}).get("slo")) or {}
    return {key: recorded.get(key) for key in ("ttft_ms", "tpot_ms")}


def _default_level(plan: Mapping[str, Any]) -> str:
    """The label of a single-level run's load (records of a multi-level run carry their own)."""
    load = plan.get("load") or {}
    if load.get("request_rate") is not None:
        return "r" + format(load["request_rate"], "g").replace(".", "p")
    return f"c{load.get('concurrency', '?')}"


def run_damaged(quality: Mapping[str, Any]) -> bool:
    """A run.json the readers could not take whole (what the run planned is not known), or stored
    records they left out (requests without figures): either way the run is not complete."""
    return bool((quality.get("by_file") or {}).get("run.json") or quality.get("records_lost"))


def service_gaps(variants: Sequence[str], records: Sequence[RequestRecord], skipped_by_service: Mapping[str, int]) -> dict[str, str]:
    """Each service of the run without one successful request, and why: nothing stored, records
    left out by the readers, or every request failed (the most common errors named)."""
    by_variant = _group_by(records, lambda r: r.variant)
    gaps = {}
    for variant in variants:
        mine = by_variant.get(variant, [])
        if any(r.ok for r in mine):
            continue
        skipped = skipped_by_service.get(variant, 0)
        left_out = f"; {skipped} of its stored records left out as unreadable or impossible" if skipped else ""
        if not mine:
            gaps[variant] = "no request stored" + left_out
            continue
        errors: dict[tuple[Any, str], int] = {}
        for record in mine:
            key = (record.error_code, " ".join(str(record.error_msg).split())[:80])
            errors[key] = errors.get(key, 0) + 1
        common = sorted(errors.items(), key=lambda item: (-item[1], str(item[0])))
        described = "; ".join(f"{count}x error {code}" + (f" ({msg})" if msg else "") for (code, msg), count in common[:3])
        more = f"; {len(common) - 3} other errors" if len(common) > 3 else ""
        gaps[variant] = f"all {len(mine)} requests failed: {described}{more}{left_out}"
    return gaps


def _quality_notes(quality: Mapping[str, Any]) -> list[str]:
    if not quality.get("skipped"):
        return []
    kinds = ", ".join(f"{count} {kind}" for kind, count in (quality.get("by_kind") or {}).items())
    first = (quality.get("skips") or [""])[0]
    return [
        f"data quality: {quality.get('records_skipped', 0)} of {quality.get('record_lines', 0)} stored records and "
        f"{quality['skipped'] - quality.get('records_skipped', 0)} other file part(s) left out ({kinds}); first: {first}"
    ]


class _GroupBuilder:
    def __init__(
        self,
        baseline: str,
        speculative: Sequence[str],
        k_of: Mapping[str, int | None],
        draft_cost_ratio: float,
        expected_requests: int | None,
        options: Mapping[str, Any],
        economics: _Economics,
    ) -> None:
        self.baseline, self.speculative, self.k_of = baseline, speculative, k_of
        self.c, self.expected_requests, self.options = draft_cost_ratio, expected_requests, options
        self.economics = economics

    def build(
        self,
        name: str,
        kind: str,
        prompt_class: str,
        records: Sequence[RequestRecord],
        acceptance: Sequence[Mapping[str, Any]],
        cases_in_group: int,
    ) -> Group:
        by_variant = _group_by(records, lambda r: r.variant)
        variants = {}
        for variant in [self.baseline, *self.speculative]:
            mine = by_variant.get(variant, [])
            figures = [a.get(variant) for a in acceptance if a.get(variant)]
            stream = None
            if variant != self.baseline:
                seed = stats.seed_for(name, variant, "stream-acceptance")
                resamples = {"resamples": self.options["resamples"], "confidence": self.options["confidence"]}
                stream = stream_acceptance.figure(by_variant.get(self.baseline, []), mine, self.k_of.get(variant), seed, **resamples)
            variants[variant] = replace(self._variant(name, variant, mine, pool_acceptance(figures)), stream_acceptance=stream)
        comparisons = [self._compare(name, variant, by_variant, variants[variant]) for variant in self.speculative]
        complete = self.expected_requests is None or all(
            len(by_variant.get(v, [])) >= self.expected_requests * cases_in_group for v in variants
        )
        return Group(name, kind, prompt_class, variants, comparisons, _outputs_match(records) if kind == "test case" else None, complete)

    def _variant(self, group: str, variant: str, records: Sequence[RequestRecord], acceptance: dict[str, Any] | None) -> VariantStats:
        good = [r for r in records if r.ok]
        distributions = {m.name: stats.distribution([getattr(r, m.attribute) for r in good]) for m in LATENCY_METRICS}
        medians = {
            m.name: stats.median_ci([getattr(r, m.attribute) for r in good], seed=stats.seed_for(group, variant, m.name), **self.options)
            for m in LATENCY_METRICS
        }
        speculates = variant != self.baseline
        return VariantStats(
            variant=variant,
            requests=len(records),
            errors=len(records) - len(good),
            distributions=distributions,
            medians=medians,
            tokens_per_chunk=stats.distribution([r.tokens_per_chunk for r in good]),
            acceptance=acceptance if speculates else None,
            throughput=[self._throughput(group, variant, records, level) for level in self.economics.group_levels(records)],
        )

    def _throughput(self, group: str, variant: str, records: Sequence[RequestRecord], level: str) -> cost.Throughput:
        e = self.economics
        seed = stats.seed_for(group, variant, level, "throughput")
        return cost.throughput(variant, level, e.items(records, level), e.servers, e.price, slo=e.has_slo, seed=seed, **self.options)

    def _savings(self, group: str, variant: str, by_variant: Mapping[str, list[RequestRecord]]) -> list[cost.Saving | None]:
        e = self.economics
        base, spec = by_variant.get(self.baseline, []), by_variant.get(variant, [])
        result = []
        for level in e.group_levels(spec):
            seed = stats.seed_for(group, variant, level, "saving")
            base_items, spec_items = e.items(base, level), e.items(spec, level)
            servers = e.servers
            result.append(
                cost.saving(variant, level, base_items, spec_items, servers, servers, e.price, slo=e.has_slo, seed=seed, **self.options)
            )
        return result

    def _compare(self, group: str, variant: str, by_variant: Mapping[str, list[RequestRecord]], stats_: VariantStats) -> Comparison:
        base = [r for r in by_variant.get(self.baseline, []) if r.ok]
        spec = [r for r in by_variant.get(variant, []) if r.ok]
        speedups = self._speedups(base, spec, group, variant)
        k = self.k_of.get(variant)
        metrics = stats_.acceptance if (stats_.acceptance or {}).get("source") not in (None, "missing") else None
        source = "metrics" if metrics else "stream" if stream_acceptance.usable(stats_.stream_acceptance) else "missing"
        estimate = theory.estimate_acceptance(metrics or (stats_.stream_acceptance if source == "stream" else None), k)
        expected = implied = None
        shortfall = None
        if estimate.a is not None and k:
            expected = theory.expected_speedup(estimate.a, k, self.c)
            measured = speedups[MODEL_METRIC]
            if measured.point is not None:
                tokens_per_step = theory.expected_tokens_per_step(estimate.a, k)
                implied = theory.implied_cost_ratio(measured.point, tokens_per_step, k)
            if measured.high is not None:
                shortfall = measured.high < expected
        cross = stream_acceptance.cross_check(_headline_figures(stats_.stream_acceptance), stats_.acceptance)
        savings = self._savings(group, variant, by_variant)
        levels = self._levels(group, variant, by_variant.get(self.baseline, []), by_variant.get(variant, []))
        return Comparison(variant, k, speedups, estimate, expected, implied, shortfall, source, cross, savings, levels)

    def _speedups(self, base: Sequence[RequestRecord], spec: Sequence[RequestRecord], *seed: str) -> dict[str, stats.Interval]:
        return {
            m.name: stats.speedup(
                [getattr(r, m.attribute) for r in base],
                [getattr(r, m.attribute) for r in spec],
                seed=stats.seed_for(*seed, m.name, "speedup"),
                **self.options,
            )
            for m in LATENCY_METRICS
        }

    def _levels(self, group: str, variant: str, base: Sequence[RequestRecord], spec: Sequence[RequestRecord]) -> list[LevelComparison]:
        """Per load level of a run at several, the speedups there (none for a run at one level)."""
        e = self.economics
        if len(e.levels) < 2:
            return []
        result = []
        for level in e.group_levels([*base, *spec]):
            b = [r for r in base if cost.level_label(r, e.default_level) == level]
            s = [r for r in spec if cost.level_label(r, e.default_level) == level]
            speedups = self._speedups([r for r in b if r.ok], [r for r in s if r.ok], group, variant, level)
            result.append(LevelComparison(level, speedups, (len(b), len(s))))
        return result


def _headline_figures(stream: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The stream figure without its bulky parts, for the side-by-side cross-check."""
    if not stream:
        return None
    return {key: stream.get(key) for key in ("source", "reliable", "reason", "requests", "mean_acceptance_length", "acceptance_rate")}


def pool_acceptance(figures: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """Acceptance over several test cases: from summed counter increases where every case has them
    (the exact pooled figure), else the mean of the cases' figures. None when nothing was measured."""
    measured = [f for f in figures if f.get("source") not in (None, "missing")]
    drafted = [f for f in measured if f.get("drafts") != 0]
    # A test case whose counters did not move (no drafts) adds nothing to the sums, and has no rates.
    measured = drafted or measured[:1]
    if not measured:
        reasons = sorted({str(f.get("reason", "")) for f in figures if f.get("reason")})
        return {"source": "missing", "reason": "; ".join(reasons)} if figures else None
    if len(measured) == 1:
        return dict(measured[0])
    if all(f.get("drafts") and f.get("draft_tokens") and f.get("accepted_tokens") is not None for f in measured):
        drafts = math.fsum(f["drafts"] for f in measured)
        accepted = math.fsum(f["accepted_tokens"] for f in measured)
        pooled: dict[str, Any] = {
            "source": "counters",
            "drafts": drafts,
            "draft_tokens": math.fsum(f["draft_tokens"] for f in measured),
            "accepted_tokens": accepted,
            "acceptance_rate": accepted / math.fsum(f["draft_tokens"] for f in measured),
            "mean_acceptance_length": 1.0 + accepted / drafts,
            "per_position": None,
        }
        positions = [f.get("per_position") for f in measured]
        if all(positions):
            width = min(len(p) for p in positions)
            weighted = list(zip(positions, measured, strict=True))
            pooled["per_position"] = [math.fsum(p[i] * f["drafts"] for p, f in weighted) / drafts for i in range(width)]
        return pooled
    pooled = {"source": measured[0]["source"], "note": f"mean of {len(measured)} test cases' figures"}
    for key in ("acceptance_rate", "mean_acceptance_length"):
        values = [f[key] for f in measured if f.get(key) is not None]
        pooled[key] = math.fsum(values) / len(values) if values else None
    return pooled


# --- the verdict ---------------------------------------------------------------------------------


def _with_verdict(summary: RunSummary) -> RunSummary:
    return RunSummary(**{**summary.__dict__, "verdict": verdict(summary)})


def verdict(summary: RunSummary) -> str:
    """One line: per prompt class, the headline (end-to-end) speedup with its CI, and whether it is clear."""
    if summary.completeness == NO_DATA:
        return "No data yet: no benchmark request has been stored for this run."
    if summary.missing_services and all(v in summary.missing_services for v in [summary.baseline, *summary.speculative]):
        why = "; ".join(f"{v}: {reason}" for v, reason in summary.missing_services.items())
        return f"PARTIAL: no usable result from any service ({why})."
    if not summary.speculative:
        return f"Only the baseline ({summary.baseline}) has results: nothing to compare."
    parts = []
    for group in summary.prompt_classes:
        for comparison in group.comparisons:
            label = group.name if len(summary.speculative) == 1 else f"{group.name} ({comparison.variant})"
            parts.append(f"{label} {_per_level(comparison) if comparison.levels else describe_speedup(comparison.headline)}")
    prefix = "PARTIAL: " if summary.completeness == PARTIAL else ""
    gaps = "".join(f" No usable result from {v}: {why}." for v, why in summary.missing_services.items())
    if len(summary.levels) > 1:
        legend = "; ".join(loads.describe_level(level, summary.servers_per_node) for level in summary.levels)
        return f"{prefix}Speculative decoding, end-to-end, per load level ({legend}): " + "; ".join(parts) + "." + gaps
    return f"{prefix}Speculative decoding, end-to-end: " + "; ".join(parts) + "." + gaps


def _per_level(comparison: Comparison) -> str:
    """``at c1 1.87x (95% CI ..., faster), at c8 0.91x (..., slower): faster at c1, slower at c8``."""
    figures = ", ".join(f"at {lc.level} {describe_speedup(lc.headline)}" for lc in comparison.levels)
    return figures + ": " + loads.where_it_changes([(lc.level, loads.outcome(lc.headline)) for lc in comparison.levels])


def describe_speedup(interval: stats.Interval) -> str:
    if interval.point is None:
        return loads.NOT_MEASURED
    text = f"{interval.point:.2f}x"
    if not interval.known:
        return text + " (no CI: too few requests)"
    assert interval.low is not None and interval.high is not None
    return f"{text} ({interval.confidence:.0%} CI {interval.low:.2f}-{interval.high:.2f}, {loads.outcome(interval)})"


# --- helpers -------------------------------------------------------------------------------------


def _group_by(records: Iterable[RequestRecord], key: Callable[[RequestRecord], str]) -> dict[str, list[RequestRecord]]:
    groups: dict[str, list[RequestRecord]] = {}
    for record in records:
        groups.setdefault(key(record), []).append(record)
    return groups


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _variant_order(plan: Mapping[str, Any], deployment: Mapping[str, Any], records: Sequence[RequestRecord]) -> list[str]:
    """The run's endpoints (a manual run may drive only some deployed services), else the deployed
    variants, then any other variant the records name."""
    named = [e.get("name") for e in plan.get("endpoints", []) if isinstance(e, dict)]
    if not named:
        named = [v.get("name") for v in deployment.get("variants", []) if isinstance(v, dict)]
    return _unique([n for n in named if n] + sorted({r.variant for r in records}))


def _baseline_of(deployment: Mapping[str, Any], plan: Mapping[str, Any], variants: Sequence[str]) -> str:
    """The driven variant deployed without a draft model; else the run's first endpoint (the Job and
    the CLI list the baseline first). A run with neither (an import) must be told."""
    for variant in deployment.get("variants", []):
        if isinstance(variant, dict) and variant.get("name") in variants and not variant.get("draft_model"):
            return str(variant["name"])
    endpoints = [e.get("name") for e in plan.get("endpoints", []) if isinstance(e, dict) and e.get("name")]
    if endpoints:
        return str(endpoints[0])
    if len(variants) > 1:
        raise ValueError(f"the run does not say which service is the baseline: name it (one of {', '.join(variants)})")
    return variants[0] if variants else ""


def _planned_cases(plan: Mapping[str, Any], records: Sequence[RequestRecord]) -> tuple[list[str], dict[str, str]]:
    cases = [c for c in (plan.get("suite") or {}).get("test_cases", []) if isinstance(c, dict) and c.get("name")]
    class_of = {c["name"]: c.get("prompt_class", "") for c in cases}
    for record in records:
        class_of.setdefault(record.test_case, record.prompt_class)
    return [c["name"] for c in cases], class_of


def _parameters(plan: Mapping[str, Any]) -> dict[str, Any]:
    load = plan.get("load") or {}
    keys = ("model", "max_tokens", "concurrency", "requests", "temperature", "seed", "api")
    return {"input_tokens": plan.get("input_tokens"), "engine": plan.get("engine"), **{k: load.get(k) for k in keys if k in load}}


def _outputs_match(records: Sequence[RequestRecord]) -> bool | None:
    """Per prompt (prompt_id: a dataset case sends several), every successful output the same."""
    digests: dict[str, set[str]] = {}
    for r in records:
        if r.ok and r.output_sha256:
            digests.setdefault(r.prompt_id, set()).add(r.output_sha256)
    return None if not digests else all(len(found) == 1 for found in digests.values())


def _notes(run: Mapping[str, Any], cases: Sequence[Group], missing: Sequence[str]) -> list[str]:
    notes = []
    status = run.get("status")
    if status and status not in FINISHED:
        notes.append(f"run status is {status}" + (f": {run['error']}" if run.get("error") else ""))
    if missing:
        notes.append(f"no results yet for {len(missing)} test case(s): {', '.join(missing)}")
    for group in cases:
        if not group.complete:
            counts = ", ".join(f"{v.variant} {v.requests}" for v in group.variants.values())
            notes.append(f"{group.name}: fewer requests than planned ({counts})")
        errors = [f"{v.variant} {v.errors}/{v.requests}" for v in group.variants.values() if v.errors]
        if errors:
            notes.append(f"{group.name}: failed requests ({', '.join(errors)}); latencies use the successful ones")
        if group.outputs_match is False:
            notes.append(f"{group.name}: outputs differ between requests at temperature 0")
    return notes


def is_rehearsal(settings: Mapping[str, Any]) -> bool:
    """Whether the run was made under the rehearsal profile (charts/spec.py settings_snapshot records it)."""
    return settings.get("profile") == "rehearsal"


def title_prefix(settings: Mapping[str, Any]) -> str:
    """What every title of a rehearsal's outputs starts with; empty otherwise."""
    return "REHEARSAL: " if is_rehearsal(settings) else ""


def rehearsal_note(settings: Mapping[str, Any]) -> str:
    """Empty unless the run was a rehearsal; then the label every output gives it: what ran, and that
    its figures are not the reference run's."""
    if not is_rehearsal(settings):
        return ""
    serving = settings.get("serving") if isinstance(settings.get("serving"), Mapping) else {}
    what = f"{serving.get('target_model', '?')} at TP {serving.get('tensor_parallel_size', '?')} on {serving.get('instance_type', '?')}"
    return (
        f"REHEARSAL ({what}): this run proves the pipeline end to end, not the reference run's figures "
        "(no TP 32 collectives, no compilation of the big model)."
    )


def cross_stack_note(settings: Mapping[str, Any]) -> str:
    """Empty when every service ran on one serving stack (or the run predates stacks); otherwise
    the label every output gives a cross-stack comparison."""
    stacks = {v.get("name", "?"): v["stack"] for v in settings.get("variants") or [] if isinstance(v, Mapping) and v.get("stack")}
    if len(set(stacks.values())) < 2:
        return ""
    where = ", ".join(f"{name} on {stack}" for name, stack in stacks.items())
    return (
        f"CROSS-STACK comparison ({where}): image, engine and Neuron settings differ besides speculation, "
        "so a speedup is not speculation's alone."
    )
