"""``specbench predict``: the serving model's predictions for a configured deployment, printed and as
JSON, and ``--calibrate``: its free parameters fitted to measured runs, saved as a profile file that
the next ``predict --profile`` and ``emulate --profile`` read. The math is in
specbench/analysis/serving_model.py and prediction.py; this module reads runs and writes files."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from specbench.analysis import provenance, theory
from specbench.analysis import serving_model as sm
from specbench.analysis.prediction import PredictionReport, headroom
from specbench.analysis.sweep import CONCURRENCY, Point, point_acceptance
from specbench.jsonfile import JsonFileError, dumps, read_json_file
from specbench.results.records import RequestRecord

WRITEUP = "writeup"  # --calibrate's name for the write-up's two published figures


def deployment_from_config(config: Any, k: int | None = None) -> sm.Deployment:
    """The serving.* and neuron_nodes.* settings of a loaded PlatformConfig as a Deployment."""
    serving, nodes = config.serving, config.neuron_nodes
    method = serving.speculation_method or "draft"
    draft = serving.draft_model if method == "draft" else serving.speculator_head
    return sm.Deployment(
        target=serving.target_model,
        method=method,
        draft=draft,
        k=serving.num_speculative_tokens if k is None else k,
        tensor_parallel_size=serving.tensor_parallel_size,
        lnc=nodes.logical_nc_config,
        max_num_seqs=serving.max_num_seqs,
        node_type=nodes.instance_type,
    )


# Deployment field -> the settings that configure it (as -c KEY=VALUE names them).
CONFIG_KEYS = {
    "target": ("serving.target_model",),
    "method": ("serving.speculation_method",),
    "draft": ("serving.draft_model", "serving.speculator_head"),
    "k": ("serving.num_speculative_tokens",),
    "tensor_parallel_size": ("serving.tensor_parallel_size",),
    "lnc": ("neuron_nodes.logical_nc_config",),
    "max_num_seqs": ("serving.max_num_seqs",),
    "node_type": ("neuron_nodes.instance_type",),
}
# What a run's settings snapshot records of them (charts/spec.py settings_snapshot, "serving").
RECORDED = {
    "target": "target_model",
    "tensor_parallel_size": "tensor_parallel_size",
    "lnc": "logical_nc_config",
    "max_num_seqs": "max_num_seqs",
    "node_type": "instance_type",
}


def explicit_fields(context: Iterable[str]) -> set[str]:
    """The Deployment fields a ``-c KEY=VALUE`` names (a method and its draft go together)."""
    keys = {item.partition("=")[0] for item in context}
    found = {name for name, settings in CONFIG_KEYS.items() if keys & set(settings)}
    return found | ({"method", "draft"} if found & {"method", "draft"} else set())


def choose_deployment(
    local: sm.Deployment, explicit: set[str], base: sm.Deployment | None, base_source: str
) -> tuple[sm.Deployment, dict[str, str]]:
    """The deployment to predict: what a profile (or the calibration runs) recorded, except the fields
    a ``-c`` sets; without one, the settings. Returns it and, per field, where its value came from."""
    chosen, sources = {}, {}
    for name in CONFIG_KEYS:
        if base is not None and name not in explicit:
            chosen[name], sources[name] = getattr(base, name), base_source
        else:
            chosen[name] = getattr(local, name)
            sources[name] = "-c " + "/".join(CONFIG_KEYS[name]) if name in explicit else "the settings (cdk.json)"
    if chosen["method"] == "":  # a baseline-only profile: predict speculation as configured
        for name in ("method", "draft", "k"):
            chosen[name], sources[name] = getattr(local, name), "the settings (cdk.json)"
    return sm.Deployment(**{**_fields(local), **chosen}), sources


def run_deployment(run: Mapping[str, Any], where: str, local: sm.Deployment, notes: list[str]) -> sm.Deployment:
    """The deployment a stored run measured: the target, TP, LNC, max_num_seqs and node type its settings
    snapshot recorded (they win over the local settings); what it does not record is taken from the local
    settings and noted as an assumption. Method, draft and k come from each endpoint's role."""
    serving = ((run.get("plan") or {}).get("deployment") or {}).get("serving") or {}
    values, missing = {}, []
    for name, key in RECORDED.items():
        value = serving.get(key) if isinstance(serving, Mapping) else None
        if value is None or value == "":
            missing.append(name)
        else:
            values[name] = value
    if missing:
        shown = ", ".join(f"{name} {getattr(local, name)}" for name in missing)
        notes.append(f"{where}: records no {', '.join(missing)}; the local settings' {shown} assumed (calibration points only)")
    try:
        return sm.Deployment(**{**_fields(local), **values})
    except (TypeError, ValueError) as error:
        raise ValueError(f"{where}: its recorded deployment is not one the model knows: {error}") from None


def from_run_carry_over(measured: sm.Deployment, predicted: sm.Deployment, run: str) -> list[str]:
    """What ``--from-run`` takes from a run measured on another deployment: only the acceptance, which
    depends on the target, the draft and the prompts (the draft's proposals are checked against the
    target's own greedy tokens), not on TP, LNC, batch or node. Another target makes it meaningless:
    ValueError naming the flag. Lines to print (none when the deployments agree)."""
    if measured.target != predicted.target:
        raise ValueError(
            f"--from-run {run}: it measured target {measured.target}, the prediction is for {predicted.target}: "
            "its acceptance does not carry over (predict that target with -c serving.target_model=..., or pass --acceptance)"
        )
    differ = [
        f"{name} {getattr(measured, name)} (predicted at {getattr(predicted, name)})"
        for name in ("tensor_parallel_size", "lnc", "max_num_seqs", "node_type")
        if getattr(measured, name) != getattr(predicted, name)
    ]
    if not differ:
        return []
    return [
        f"--from-run {run}: measured at {', '.join(differ)}: only its acceptance is used, which carries over "
        "(it depends on the target, draft and prompts, not on these); no latency of the run enters the prediction"
    ]


def parse_acceptance(items: Iterable[str]) -> dict[str, float]:
    """``--acceptance CLASS=A`` flags: per-token acceptance a in [0, 1] per prompt class."""
    found = {}
    for item in items:
        name, sep, value = item.partition("=")
        try:
            a = float(value)
        except ValueError:
            a = math.nan
        if not sep or not name or not 0.0 <= a <= 1.0:
            raise ValueError(f"--acceptance {item!r}: expected CLASS=A with A a probability in [0, 1]")
        found[name] = a
    return found


def acceptance_from_points(points: Sequence[Point]) -> dict[str, float]:
    """Per prompt class, the mean acceptance a of a run's (or sweep's) speculative points."""
    baseline = [r for p in points if p.variant.is_baseline for r in p.records]
    per_class: dict[str, list[float]] = {}
    notes: list[str] = []
    for point in points:
        if point.variant.is_baseline:
            continue
        for prompt_class in sorted({r.prompt_class for r in point.records}):
            mine = [r for r in point.records if r.prompt_class == prompt_class]
            base = [r for r in baseline if r.prompt_class == prompt_class]
            a, _ = point_acceptance(point, prompt_class, base, mine, notes)
            if a is not None:
                per_class.setdefault(prompt_class, []).append(a)
    return {name: math.fsum(values) / len(values) for name, values in per_class.items()}


def measured_points(points: Sequence[Point], deployment: sm.Deployment, notes: list[str]) -> list[sm.MeasuredPoint]:
    """One measured TPOT per point and prompt class (the median over its completed requests), with
    the class's acceptance, the point's k and draft, its clients in flight and its mean lengths."""
    acceptance = acceptance_from_points(points)
    found = []
    for point in points:
        if point.load.kind != CONCURRENCY:
            notes.append(f"{point.point_id}: an open-loop load ({point.load.describe()}); calibration uses closed-loop points only")
            continue
        dep = deployment.with_k(0)
        if not point.variant.is_baseline:
            v = point.variant
            method = ("eagle3" if v.method == "eagle3" else "draft") if v.method else (deployment.method or "draft")
            draft = v.draft_model or (deployment.draft if method == deployment.method else "")
            if not v.draft_model:
                notes.append(f"{point.point_id}: the run records no draft; the settings' {draft or '(none)'} assumed")
            dep = sm.Deployment(**{**_fields(deployment), "method": method, "draft": draft, "k": int(v.k or 1)})
        for prompt_class in sorted({r.prompt_class for r in point.records}):
            ok = [r for r in point.records if r.prompt_class == prompt_class and r.ok and r.time_per_output_token_s]
            if not ok:
                continue
            a = 0.0 if point.variant.is_baseline else acceptance.get(prompt_class)
            if a is None:
                notes.append(f"{point.point_id}, {prompt_class}: no acceptance figure; left out")
                continue
            workload = sm.Workload(_mean_int(r.input_tokens for r in ok) or 64, _mean_int(r.output_tokens for r in ok) or 600)
            tpot = statistics.median(r.time_per_output_token_s for r in ok)  # type: ignore[type-var]
            label = f"{point.point_id} {prompt_class}"
            found.append(sm.MeasuredPoint(dep, int(point.load.value), float(tpot), a, label, "tpot", workload))
    return found


def _fields(dep: sm.Deployment) -> dict[str, Any]:
    from dataclasses import asdict

    return asdict(dep)


def _mean_int(values: Iterable[int | None]) -> int | None:
    known = [v for v in values if v]
    return round(math.fsum(known) / len(known)) if known else None


# --- text -------------------------------------------------------------------------------------------


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f}"


def _share(value: float | None) -> str:
    return "not modelled" if value is None else f"{value:.3g}"


def _money(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def render(report: PredictionReport) -> list[str]:
    dep, p = report.deployment, report.profile
    draft = f"{dep.method} {dep.draft} k={dep.k}"
    lines = [
        f"deployment: {dep.target} + {draft}, TP {dep.tensor_parallel_size} at LNC {dep.lnc} = {dep.devices} devices "
        f"({dep.replicas_per_node} replicas per {dep.node_type}), max_num_seqs {dep.max_num_seqs}",
        f"workload: {report.workload.prompt_tokens} prompt tokens, {report.workload.output_tokens} output tokens; closed loop",
        f"profile: overhead {_ms(p.overhead_s)} ms/step, bandwidth efficiency {_share(p.bandwidth_efficiency)}, "
        f"compute efficiency {_share(p.compute_efficiency)}, draft overhead {_ms(p.draft_overhead_s)} ms/draft step",
    ]
    lines += _provenance_lines(report)
    ratio, room = headroom(report.baseline_step_s, dep)
    lines.append(
        f"weight-bandwidth bound of a plain step: {_ms(report.weight_bound_s)} ms; the model's plain step at batch "
        f"{dep.max_num_seqs} is {_ms(report.baseline_step_s)} ms = {ratio:.1f}x the bound ({_ms(room)} ms a better compile could still win)"
    )
    price = "no price configured" if report.price_per_hour is None else f"${report.price_per_hour:.2f}/node-hour"
    header = f"{'clients':>7} {'TPOT base':>9} {'TPOT spec':>9} {'E2E base':>8} {'E2E spec':>8} {'speedup':>7} "
    header += f"{'tok/s/node b':>12} {'tok/s/node s':>12} {'$/Mtok b':>8} {'$/Mtok s':>8} {'best k':>6}"
    if report.calibration is not None:
        header += "  range"
    for cls in report.classes:
        lines += ["", f"{cls.prompt_class}: a = {cls.a:.3f} ({cls.source}); cost at {price}", header]
        for r in cls.rows:
            lines.append(
                f"{r.concurrency:>7} {_ms(r.baseline.tpot_s):>9} {_ms(r.speculative.tpot_s):>9} {r.baseline.e2e_s:>8.2f} "
                f"{r.speculative.e2e_s:>8.2f} {r.speedup:>6.2f}x {r.baseline.tokens_per_s_per_node:>12.0f} "
                f"{r.speculative.tokens_per_s_per_node:>12.0f} {_money(r.baseline_cost):>8} {_money(r.speculative_cost):>8} "
                f"{r.best_k:>3} ({r.best_k_speedup:.2f}x)"
                + (("  extrapolated" if r.extrapolated else "  measured") if report.calibration is not None else "")
            )
        lines.append(f"crossover: {cls.text}")
    lines += ["", "TPOT in ms, E2E in s. Assumptions:"] + [f"- {a}" for a in report.assumptions]
    return lines


def _value(profile: sm.Profile, name: str) -> str:
    value = getattr(profile, name)
    return f"{_ms(value)} ms" if name.endswith("_s") else _share(value)


def _provenance_lines(report: PredictionReport) -> list[str]:
    """Where the deployment's fields came from, and per free parameter fitted or assumed (issue 33)."""
    lines = []
    if report.deployment_sources:
        by_source: dict[str, list[str]] = {}
        for name, source in report.deployment_sources:
            by_source.setdefault(source, []).append(name)
        lines.append("deployment from: " + "; ".join(f"{source}: {', '.join(names)}" for source, names in by_source.items()))
    cal = report.calibration
    if cal is not None:
        lines.append(f"parameters ({cal.source}; {provenance.measured_text(cal)}):")
        lines += [f"  {p.name:<21} {_value(report.profile, p.name):>10}  {p.status}: {p.note}" for p in report.parameters]
    return lines


def render_fit(fit: sm.Fit, points: Sequence[sm.MeasuredPoint], calibration: provenance.Calibration | None = None) -> list[str]:
    p = fit.profile
    cal = calibration or provenance.from_points("the calibration", fit.fitted, points)
    residual = f"  rms relative residual {fit.rms_relative:.2%}"
    if len({(q.deployment, q.concurrency, q.a) for q in points}) <= len(fit.fitted):
        residual += f" ({len(fit.fitted)} parameter(s) fitted to as many distinct points or fewer: a small residual proves nothing)"
    lines = [
        f"fitted {', '.join(fit.fitted) or 'nothing'} on {len(points)} point(s) (the rest kept from the starting profile):",
        f"  overhead {_ms(p.overhead_s)} ms/step, bandwidth efficiency {_share(p.bandwidth_efficiency)}, compute efficiency "
        f"{_share(p.compute_efficiency)}, draft overhead {_ms(p.draft_overhead_s)} ms/draft step",
        *[
            f"  {q.name:<21} {_value(p, q.name):>10}  {q.status}" + ("" if q.status == "fitted" else f": {q.note}")
            for q in provenance.parameters(cal, points[0].deployment if points else sm.Deployment())
        ],
        f"  {provenance.measured_text(cal)}",
        residual,
        f"{'point':<52} {'measured':>9} {'fitted':>9} {'residual':>8} {'step':>7} {'x bound':>7}",
    ]
    for point, residual in zip(points, fit.residuals, strict=True):
        tokens = theory.expected_tokens_per_step(point.a, point.deployment.k) if point.deployment.k else 1.0
        step = point.value_s * tokens if point.metric == "tpot" else point.value_s
        ratio = step / sm.weight_bound_s(point.deployment)
        lines.append(
            f"{residual.label[:52]:<52} {_ms(residual.measured_s):>9} {_ms(residual.fitted_s):>9} {residual.relative:>+8.2%} "
            f"{_ms(step):>7} {ratio:>6.1f}x"
        )
    lines.append("(ms; step = the measured decode step, TPOT x tokens per step; x bound = its multiple of the weight-bandwidth bound)")
    return lines


def save_profile(path: Path, fit: sm.Fit, deployment: sm.Deployment, calibration: provenance.Calibration | None = None) -> None:
    document = sm.profile_document(fit.profile, deployment, fit)
    if calibration is not None:  # the deployments and loads measured: predict --profile marks what lies outside
        document["measured"] = provenance.measured_document(calibration)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dumps(document, indent=2) + "\n", encoding="utf-8")


def read_profile(path: str, base: sm.Profile) -> tuple[sm.Profile, sm.Deployment | None, provenance.Calibration]:
    """A profile file: the profile, the deployment it recorded, and what its fit rests on."""
    try:
        data = read_json_file(path)
    except JsonFileError as error:
        raise ValueError(f"--profile {path}: {error}") from None
    try:
        profile, deployment = sm.read_profile_document(data, base)
        return profile, deployment, provenance.from_document(data, f"profile {path}")
    except (TypeError, ValueError) as error:
        raise ValueError(f"--profile {path}: {error}") from None


def json_document(report: PredictionReport, fit: sm.Fit | None = None) -> dict[str, Any]:
    from specbench.analysis.stats import json_safe

    data = report.to_dict()
    if fit is not None:
        data["calibration"] = sm.profile_document(fit.profile, None, fit)
    return json_safe(data)


def acceptance_table(acceptance: Mapping[str, float], source: str) -> dict[str, tuple[float, str]]:
    return {name: (a, source) for name, a in acceptance.items()}


def records_of(points: Sequence[Point]) -> list[RequestRecord]:
    return [r for p in points for r in p.records]


# Without a measured or stated acceptance: the emulator's two write-up classes (structured test cases
# 0.9, open-ended 0.6; specbench/emulator/server.py default_profiles), said so in the output.
ASSUMED_ACCEPTANCE = {"structured": 0.9, "open-ended": 0.6}


def calibrated_deployment(points: Sequence[sm.MeasuredPoint], local: sm.Deployment) -> sm.Deployment | None:
    """The deployment a calibration stands for (what its profile records): of the measured speculative
    deployments, the one with the configured k if measured, else the one measured most (the larger k
    on a tie); a baseline-only calibration gives its baseline deployment."""
    candidates = [p.deployment for p in points if p.deployment.method] or [p.deployment for p in points]
    if not candidates:
        return None
    same_k = [d for d in candidates if d.k == local.k]
    pool = same_k or candidates
    return max(dict.fromkeys(pool), key=lambda d: (pool.count(d), d.k))
