"""What a profile fitted at one TP says about another: the per-step overhead's dependence on TP, and a
candidate's predicted TPOT, TTFT and tokens/s per node as ranges over it. Pure, standard library.

The serving model's weight and compute terms scale with the devices a candidate has (its bandwidth
and FLOPS); the fixed per-step overheads (the target's and the draft's) do not follow from the
hardware figures. Fitted at one TP they cannot tell how they change with TP: part is launch and
sampling, the same at any TP; part is the collectives, two all-reduces per layer whose latency
grows with the ranks taking part. So an overhead fitted at TP_fit is carried to TP as

    overhead(TP) = overhead(TP_fit) x (TP / TP_fit) ** beta,   beta in [beta_lo, beta_hi]

with the assumed range [0, 1]: 0 is an overhead that does not depend on TP; 1 is one linear in
the ranks, as a ring all-reduce's latency terms are (2 (p - 1) message steps; a recursive-doubling
or tree all-reduce takes log2 p, which lies inside the range: from TP 32 to 4 it is
beta = 0.44, to 64 beta = 0.26; Thakur, Rabenseifner and Gropp, "Optimization of Collective
Communication Operations in MPICH", IJHPCA 19(1), 2005). Smaller collectives cost no more, so the
range starts at 0. Every predicted figure is reported at both ends; TPOT, TTFT and cost are
monotonic in the overhead, so the ends bound the range.

With profiles fitted at several TPs (a sweep with TP variants), ``fit_tp_exponent`` fits beta
(a least-squares line through log overhead against log TP) and ``TPScaling`` carries that one value.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from specbench.analysis import provenance
from specbench.analysis import serving_model as sm
from specbench.analysis.candidates import Candidate
from specbench.analysis.ranking import PREDICTED, Figures, Range

ASSUMED_BETA = (0.0, 1.0)
ASSUMED_SOURCE = "assumed range: 0 = independent of TP (launch, sampling), 1 = linear in the collectives' ranks (ring all-reduce)"


@dataclass(frozen=True)
class TPScaling:
    """How the per-step overheads (target and draft) carry from the TP they were fitted at."""

    fitted_tp: int
    beta_lo: float = ASSUMED_BETA[0]
    beta_hi: float = ASSUMED_BETA[1]
    source: str = ASSUMED_SOURCE

    def __post_init__(self) -> None:
        if not isinstance(self.fitted_tp, int) or isinstance(self.fitted_tp, bool) or self.fitted_tp < 1:
            raise ValueError(f"tp scaling: fitted_tp must be an integer >= 1; got {self.fitted_tp!r}")
        finite = all(isinstance(b, (int, float)) and math.isfinite(b) for b in (self.beta_lo, self.beta_hi))
        if not finite or self.beta_lo > self.beta_hi:
            raise ValueError(f"tp scaling: expected finite beta_lo <= beta_hi; got {self.beta_lo!r}, {self.beta_hi!r}")

    @property
    def betas(self) -> tuple[float, ...]:
        return (self.beta_lo,) if self.beta_lo == self.beta_hi else (self.beta_lo, self.beta_hi)

    def factor(self, tp: int, beta: float) -> float:
        return (tp / self.fitted_tp) ** beta

    def scaled(self, profile: sm.Profile, tp: int, beta: float) -> sm.Profile:
        f = self.factor(tp, beta)
        return replace(profile, overhead_s=profile.overhead_s * f, draft_overhead_s=profile.draft_overhead_s * f)

    def describe(self, tp: int) -> str:
        if tp == self.fitted_tp:
            return f"per-step overheads as fitted (TP {tp})"
        if self.beta_lo == self.beta_hi:
            return (
                f"per-step overheads fitted at TP {self.fitted_tp}, x (TP/{self.fitted_tp})^{self.beta_lo:.2g} at TP {tp} ({self.source})"
            )
        lo, hi = sorted(self.factor(tp, b) for b in self.betas)
        return (
            f"per-step overheads fitted at TP {self.fitted_tp}: at TP {tp} x (TP/{self.fitted_tp})^beta, beta in "
            f"[{self.beta_lo:g}, {self.beta_hi:g}], i.e. x {lo:.3g} to {hi:.3g}"
        )


def fit_tp_exponent(overheads: Sequence[tuple[int, float]], reference_tp: int | None = None, source: str = "") -> TPScaling:
    """beta from per-step overheads measured (fitted) at two or more TPs: least squares of
    ln(overhead) on ln(TP). ``reference_tp`` (default the largest TP given) is the TP whose
    profile the scaling is applied to."""
    points = [(tp, o) for tp, o in overheads]
    if any(not isinstance(tp, int) or tp < 1 or not (isinstance(o, (int, float)) and o > 0) for tp, o in points):
        raise ValueError(f"tp exponent: expected (TP >= 1, overhead > 0) pairs; got {points!r}")
    xs = [math.log(tp) for tp, _ in points]
    if len(set(xs)) < 2:
        raise ValueError("tp exponent: needs overheads at two or more TPs (one TP cannot tell how the overhead moves with TP)")
    ys = [math.log(o) for _, o in points]
    mx, my = math.fsum(xs) / len(xs), math.fsum(ys) / len(ys)
    beta = math.fsum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / math.fsum((x - mx) ** 2 for x in xs)
    tps = sorted({tp for tp, _ in points})
    label = source or f"fitted on per-step overheads at TP {', '.join(map(str, tps))}"
    return TPScaling(reference_tp or tps[-1], beta, beta, label)


# --- predicted figures of a candidate ---------------------------------------------------------------


@dataclass(frozen=True)
class Basis:
    """What a prediction rests on: the profile and where it came from, the deployment it was fitted on
    (None: not recorded), how its overheads carry over TP, the acceptance per prompt class (a, source),
    the request lengths, and each class's share of the requests (default: equal)."""

    profile: sm.Profile
    scaling: TPScaling
    calibration: provenance.Calibration
    fitted_on: sm.Deployment | None
    acceptance: Mapping[str, tuple[float, str]]
    workload: sm.Workload = sm.DEFAULT_WORKLOAD
    shares: Mapping[str, float] | None = None

    def class_shares(self) -> dict[str, float]:
        names = list(self.acceptance)
        if not names:
            raise ValueError("prediction: no prompt class with an acceptance")
        raw = {n: (self.shares or {}).get(n, 1.0 if self.shares is None else 0.0) for n in names}
        total = math.fsum(raw.values())
        if total <= 0 or any(v < 0 for v in raw.values()):
            raise ValueError(f"prediction: class shares must be >= 0 and not all 0; got {raw!r}")
        return {n: v / total for n, v in raw.items()}


def _one(dep: sm.Deployment, profile: sm.Profile, basis: Basis, shares: Mapping[str, float], c: int) -> tuple[float, float, float]:
    """(TPOT of the slowest class, its TTFT likewise, tokens/s per node of the mix) at ``c`` clients."""
    classes = {"all": (0.0, "")} if not dep.method else basis.acceptance
    found = {name: sm.predict(dep, profile, a, c, basis.workload) for name, (a, _) in classes.items()}
    tpot = max(p.tpot_s for p in found.values())
    ttft = max(p.ttft_s for p in found.values())
    if not dep.method:
        return tpot, ttft, found["all"].tokens_per_s_per_node
    # Equal output lengths: a class's requests hold a slot for 1 / its throughput per token, so the
    # mix's throughput is the share-weighted harmonic mean.
    thr = 1.0 / math.fsum(shares[name] / p.tokens_per_s_per_node for name, p in found.items())
    return tpot, ttft, thr


def row_assumptions(candidate: Candidate, basis: Basis, concurrency: int) -> tuple[str, ...]:
    """What this row assumes beyond what every row does (``shared_assumptions``)."""
    dep, was = candidate.deployment, basis.fitted_on
    notes = []
    if dep.tensor_parallel_size != basis.scaling.fitted_tp:
        notes.append(basis.scaling.describe(dep.tensor_parallel_size))
    if was is not None:
        if was.node_type != dep.node_type:
            notes.append(f"profile fitted on {was.node_type}: per-step overheads taken as the same on {dep.node_type} at equal TP")
        if was.lnc != dep.lnc:
            notes.append(f"profile fitted at LNC {was.lnc}: taken as holding at LNC {dep.lnc}")
        if was.target != dep.target:
            notes.append(f"profile fitted on target {was.target}: taken as holding for {dep.target}")
        if dep.method and (was.method, was.draft) != (dep.method, dep.draft):
            notes.append(f"draft overhead fitted with {was.method or 'no'} draft {was.draft or '-'}: taken as holding for {dep.draft}")
    if provenance.extrapolated(basis.calibration, dep, concurrency):
        notes.append("a load outside those the profile was measured at (extrapolated)")
    return tuple(notes)


SCENARIO_STEPS = 4  # the Pareto front is judged at beta_lo + i / 4 of the range, i = 0..4


def scenario_betas(scaling: TPScaling, steps: int = SCENARIO_STEPS) -> list[float]:
    if scaling.beta_lo == scaling.beta_hi:
        return [scaling.beta_lo]
    return [scaling.beta_lo + (scaling.beta_hi - scaling.beta_lo) * i / steps for i in range(steps + 1)]


def predicted_figures(candidate: Candidate, basis: Basis, loads: Sequence[int]) -> list[Figures]:
    """The candidate's figures at each load as ranges over ``basis.scaling``'s betas (the ends bound
    them: every figure is monotonic in the overhead), with the figures at each scenario beta."""
    dep, shares = candidate.deployment, basis.class_shares()
    where = f"serving model; profile: {basis.calibration.source}"
    found = []
    for c in sorted(set(loads)):
        scenarios = []
        for b in scenario_betas(basis.scaling):
            tpot, ttft, thr = _one(dep, basis.scaling.scaled(basis.profile, dep.tensor_parallel_size, b), basis, shares, c)
            scenarios.append((f"beta={b:g}", tpot, ttft, thr))
        tpot_r, ttft_r, thr_r = (Range.spanning([s[i] for s in scenarios]) for i in (1, 2, 3))
        found.append(Figures(candidate, c, tpot_r, ttft_r, thr_r, PREDICTED, where, row_assumptions(candidate, basis, c), tuple(scenarios)))
    return found


def shared_assumptions(basis: Basis) -> list[str]:
    """What every predicted row assumes: the model's own assumptions, the parameters not fitted, the
    acceptance and its sources, how the classes combine, the TP range."""
    found = list(sm.ASSUMPTIONS)
    reference = basis.fitted_on or sm.Deployment()
    for p in provenance.parameters(basis.calibration, reference):
        if p.status == "assumed":
            found.append(f"{p.name} = {getattr(basis.profile, p.name)}: {p.note}")
    a = ", ".join(f"{name} a = {v:.2f} ({source})" for name, (v, source) in basis.acceptance.items())
    found.append(f"acceptance per prompt class: {a}; TPOT and TTFT are the slowest class's, tokens/s the mix's (equal request shares)")
    found.append(f"TP: {basis.scaling.source}; the weight and compute terms scale with the candidate's devices")
    found.append("load = clients in flight per server (closed loop), every server of the node at that load: the cost of a node kept busy")
    return found
