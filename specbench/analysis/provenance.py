"""Where a prediction's numbers come from (issue 33): which of a profile's free parameters were fitted
and which are assumptions, on which deployments and loads they were measured, whether they carry over
to the deployment predicted, and which predicted loads lie outside the measured range. Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

from specbench.analysis import serving_model as sm

# The profile's fields, and the fit's names for them (the fit is linear in the inverse efficiencies).
PARAMETERS = ("overhead_s", "bandwidth_efficiency", "compute_efficiency", "draft_overhead_s")
FIELD_OF = dict(zip(sm.FREE, PARAMETERS, strict=True))

# What a parameter depends on beyond the modelled terms: fitted on one deployment, it holds for another
# only where these fields agree (k and max_num_seqs enter the step time through the model itself).
DEPENDS_ON = {
    "overhead_s": ("target", "tensor_parallel_size", "lnc", "node_type"),  # launch, collectives, sampling per step
    "bandwidth_efficiency": ("target", "tensor_parallel_size", "lnc", "node_type"),
    "compute_efficiency": ("target", "tensor_parallel_size", "lnc", "node_type"),
    "draft_overhead_s": ("method", "draft", "tensor_parallel_size", "lnc", "node_type"),
}
# What a fit needs to identify each parameter (serving_model.identifiable's order and reasons).
NEEDS = {
    "overhead_s": "any measured point",
    "draft_overhead_s": "a speculative point beside a baseline one",
    "compute_efficiency": "points at two or more batch sizes",
    "bandwidth_efficiency": "points at two TP sizes or with two drafts",
}


@dataclass(frozen=True)
class Calibration:
    """What a profile rests on: the parameters fitted (Profile field names), the deployments and loads
    measured (clients in flight, and the batch each ran at), and where it came from."""

    source: str
    fitted: tuple[str, ...] = ()
    deployments: tuple[sm.Deployment, ...] = ()
    concurrencies: tuple[int, ...] = ()
    batches: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "fitted": list(self.fitted),
            "assumed": [p for p in PARAMETERS if p not in self.fitted],
            "deployments": [asdict(d) for d in self.deployments],
            "concurrencies": list(self.concurrencies),
            "batches": list(self.batches),
        }


def from_points(source: str, fitted: Iterable[str], points: Sequence[sm.MeasuredPoint]) -> Calibration:
    """``fitted``: the fit's names (serving_model.FREE)."""
    deployments = tuple(dict.fromkeys(p.deployment for p in points))
    concurrencies = tuple(sorted({p.concurrency for p in points}))
    batches = tuple(sorted({min(p.concurrency, p.deployment.max_num_seqs) for p in points}))
    return Calibration(source, tuple(FIELD_OF[n] for n in fitted), deployments, concurrencies, batches)


def writeup() -> Calibration:
    """The default profile: the write-up's two figures fix the two overheads (serving_model.writeup_profile)."""
    return from_points("the write-up's figures (the default profile)", ("overhead_s", "draft_overhead_s"), sm.writeup_points())


def from_document(data: Any, source: str) -> Calibration:
    """A profile file's record of its fit; a file that records none fitted nothing (every parameter as given)."""
    if not isinstance(data, Mapping):
        return Calibration(f"{source} (no fit recorded: every parameter as given)")
    fitted = [FIELD_OF.get(n, n) for n in data.get("fitted") or [] if isinstance(n, str)]
    measured = data.get("measured") if isinstance(data.get("measured"), Mapping) else {}
    known = {f.name for f in fields(sm.Deployment)}
    deployments = []
    for raw in measured.get("deployments") or ([data["deployment"]] if isinstance(data.get("deployment"), Mapping) else []):
        if isinstance(raw, Mapping) and set(raw) <= known:
            deployments.append(sm.Deployment(**raw))
    ints = lambda key: tuple(sorted(v for v in measured.get(key) or [] if isinstance(v, int) and v >= 1))  # noqa: E731
    label = source if fitted else f"{source} (no fit recorded: every parameter as given)"
    return Calibration(label, tuple(p for p in PARAMETERS if p in fitted), tuple(deployments), ints("concurrencies"), ints("batches"))


def measured_document(calibration: Calibration) -> dict[str, Any]:
    """What a saved profile adds about its fit (read back by ``from_document``)."""
    return {
        "deployments": [asdict(d) for d in calibration.deployments],
        "concurrencies": list(calibration.concurrencies),
        "batches": list(calibration.batches),
    }


@dataclass(frozen=True)
class Parameter:
    name: str
    status: str  # fitted | assumed
    note: str  # why assumed, or whether a fitted value carries over to the predicted deployment

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


def _describe(dep: sm.Deployment, names: Sequence[str]) -> str:
    return ", ".join(f"{name} {getattr(dep, name) or '-'}" for name in names)


def parameters(calibration: Calibration, dep: sm.Deployment) -> list[Parameter]:
    """Per free parameter: fitted or assumed, and for a fitted one whether it was fitted on a deployment
    that agrees with ``dep`` on what it depends on (else its value is assumed to carry over)."""
    found = []
    for name in PARAMETERS:
        if name not in calibration.fitted:
            found.append(Parameter(name, "assumed", f"the starting value, not fitted (identifying it needs {NEEDS[name]})"))
            continue
        keys = DEPENDS_ON[name]
        relevant = [d for d in calibration.deployments if d.method or name != "draft_overhead_s"]
        if not relevant or any(all(getattr(d, k) == getattr(dep, k) for k in keys) for d in relevant):
            found.append(Parameter(name, "fitted", "carries over" if relevant else "fitted (deployment not recorded)"))
        else:
            was = relevant[0]
            differ = [k for k in keys if getattr(was, k) != getattr(dep, k)]
            found.append(
                Parameter(name, "fitted", f"an assumption here: fitted at {_describe(was, differ)}, predicted at {_describe(dep, differ)}")
            )
    return found


def extrapolated(calibration: Calibration, dep: sm.Deployment, concurrency: int) -> bool:
    """Whether a prediction at ``concurrency`` clients lies outside the measured loads: its clients in
    flight or its batch (min(clients, max_num_seqs)) outside the measured range; with no measured load
    recorded, every load is."""
    if not calibration.concurrencies or not calibration.batches:
        return True
    batch = min(concurrency, dep.max_num_seqs)
    lo, hi = calibration.concurrencies[0], calibration.concurrencies[-1]
    return not (lo <= concurrency <= hi and calibration.batches[0] <= batch <= calibration.batches[-1])


def measured_text(calibration: Calibration) -> str:
    if not calibration.concurrencies:
        return "no measured load recorded: every row is an extrapolation"
    c, b = calibration.concurrencies, calibration.batches
    span = lambda v: f"{v[0]}" if v[0] == v[-1] else f"{v[0]}-{v[-1]}"  # noqa: E731
    return f"measured at {span(c)} clients in flight (batch {span(b)}); rows outside are marked extrapolated"
