"""Which stored sweep points a staged decision may use (issue 33), before they decide anything.

A point is used only when its run.json says it belongs to this sweep and is the point its folder
is named for, it is complete (status "completed", no live writer holding its lock, no record or
run.json lost to damage: a truncated file), and its variant and load are the configuration's: the
baseline (no draft) or the configured variant of that name with the same draft and k, at a
configured load. A point that fails a check of its own is left out and listed with why; a point
that contradicts the settings (a variant dropped, renamed or changed, a load no longer configured)
is a settings problem, reported as one line by the caller, never a quiet change of plan.

Pure: specbench/outputs/sweep_next.py gives each point folder as read (sweep_report.load_sweep_folders).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from specbench.analysis.sweep import Point
from specbench.sweep.points import BASELINE, NAME, Load, SweepVariant

COMPLETED = "completed"  # specbench/runner.py: a run that finished every request


@dataclass(frozen=True)
class Folder:
    """One stored point folder: its name, run.json (as read: a dead writer's "running" is
    "interrupted"), whether a writer holds its lock (None: no lock file), what was lost, its points."""

    name: str
    run: Mapping[str, Any]
    locked: bool | None = None
    lost: Sequence[str] = ()
    points: Sequence[Point] = ()


@dataclass(frozen=True)
class Verdict:
    used: list[Point] = field(default_factory=list)
    left_out: list[tuple[str, str]] = field(default_factory=list)  # (point folder, why)
    contradictions: list[str] = field(default_factory=list)  # settings the stored points contradict


def _point_problem(folder: Folder, sweep_id: str) -> str | None:
    sweep = folder.run.get("sweep")
    if not isinstance(sweep, dict):
        return "run.json has no sweep object (not a sweep point)"
    if sweep.get("sweep_id") != sweep_id:
        return f"run.json says it belongs to sweep {sweep.get('sweep_id')!r}, not {sweep_id!r}"
    if sweep.get("point_id") != folder.name:
        return f"run.json names point {sweep.get('point_id')!r}, stored as {folder.name!r}"
    status = str(folder.run.get("status", ""))
    if folder.locked or status == "running":
        return "still running (its writer holds the lock)" if folder.locked else "still running (run.json says running)"
    if status != COMPLETED:
        return f"not complete: status {status or 'missing'!r}" + (f" ({folder.run['error']})" if folder.run.get("error") else "")
    if folder.lost:
        return f"damaged or truncated: {len(folder.lost)} part(s) lost ({'; '.join(folder.lost[:2])})"
    if not folder.points:
        return "run.json does not say the point's variant and load"
    return None


def _settings_problem(point: Point, variants: Mapping[str, SweepVariant], loads: Sequence[Load]) -> str | None:
    v = point.variant
    if v.name == BASELINE:
        if v.draft_model or v.k:
            return f"variant baseline with draft {v.draft_model!r}, k {v.k} (the baseline has none)"
    elif v.name not in variants:
        return f"variant {v.name} is not configured (dropped or renamed in sweep.variants?)"
    else:
        want = variants[v.name]
        if (v.draft_model or "", int(v.k or 0)) != (want.draft_model, want.k):
            return f"variant {v.name} measured draft {v.draft_model} k={v.k}; sweep.variants has it as draft {want.draft_model} k={want.k}"
        if int(v.tp or 0) != want.tp:  # 0: the services' TP (sweep.tensor_parallel_sizes)
            return f"variant {v.name} measured at TP {v.tp or 'of the services'}; the sweep has it at TP {want.tp or 'of the services'}"
    if (point.load.kind, float(point.load.value)) not in {(load.kind, float(load.value)) for load in loads}:
        configured = ", ".join(lo.label for lo in loads)
        return f"load {point.load.label} is not configured (sweep.concurrencies, sweep.request_rates: {configured})"
    return None


def check(folders: Sequence[Folder], sweep_id: str, variants: Sequence[SweepVariant], loads: Sequence[Load]) -> Verdict:
    """The points a decision may use, those left out with why, and the settings they contradict."""
    by_name = {v.name: v for v in variants}
    verdict = Verdict()
    for folder in sorted(folders, key=lambda f: f.name):
        problem = _point_problem(folder, sweep_id)
        if problem:
            verdict.left_out.append((folder.name, problem))
            continue
        for point in folder.points:
            contradiction = _settings_problem(point, by_name, loads)
            if contradiction:
                verdict.contradictions.append(f"{folder.name}: {contradiction}")
            else:
                verdict.used.append(point)
    return verdict


# --- a grid sweep: no configuration to compare with, so each point is checked against its own record ---

_K_PART = re.compile(r"^k(\d+)\Z")


def _family(name: str) -> str:
    """A variant name without its ``-k<N>`` part: ``q17-k7`` -> ``q17`` (staged.variant_of, sweep.variants names)."""
    return "-".join(part for part in name.split("-") if not _K_PART.match(part))


def _own_problem(point: Point, folder: str) -> str | None:
    """What a point's own record contradicts: its folder (point id) names its variant and load, and a
    ``-k<N>`` part of the variant name is the k that ran."""
    v = point.variant
    parts = folder.split("-")
    if not NAME.fullmatch(v.name):
        return f"variant.name {v.name!r} is not a DNS label"
    if not folder.startswith(f"{v.name}-") or point.load.label not in parts:
        return f"run.json records variant {v.name} at load {point.load.label}, which point id {folder!r} does not name (mismatch)"
    for part in v.name.split("-"):
        found = _K_PART.match(part)
        if found and int(found.group(1)) != int(v.k or 0):
            return f"run.json records k={v.k}, its variant name {v.name} says k={found.group(1)} (mismatch)"
    return None


def check_grid(folders: Sequence[Folder], sweep_id: str) -> Verdict:
    """The points a report may use when no configuration says what the sweep holds: each point's own
    checks (_point_problem), its record against its point id, and one draft model per variant family
    (``q17-k3`` .. ``q17-k9`` measured one draft: a point recording another is left out)."""
    verdict, candidates = Verdict(), []
    for folder in sorted(folders, key=lambda f: f.name):
        # Damaged records within a point are skipped and counted by the reader (tests/test_damaged_runs.py): the rest is used.
        problem = _point_problem(replace(folder, lost=()), sweep_id) or next(
            (p for p in (_own_problem(pt, folder.name) for pt in folder.points) if p), None
        )
        if problem:
            verdict.left_out.append((folder.name, problem))
        else:
            candidates.append(folder)
    drafts: dict[str, Counter[str]] = {}
    for folder in candidates:
        for point in folder.points:
            if point.variant.name != BASELINE:
                drafts.setdefault(_family(point.variant.name), Counter())[point.variant.draft_model or ""] += 1
    for folder in candidates:
        odd = next((p for p in folder.points if p.variant.name != BASELINE and _odd_draft(p, drafts)), None)
        if odd is not None:
            usual = drafts[_family(odd.variant.name)].most_common(1)[0][0]
            family = _family(odd.variant.name)
            why = f"run.json records draft {odd.variant.draft_model or 'none'}; the other {family} points measured {usual} (mismatch)"
            verdict.left_out.append((folder.name, why))
        else:
            verdict.used.extend(folder.points)
    return verdict


def _odd_draft(point: Point, drafts: Mapping[str, Counter[str]]) -> bool:
    """A draft that fewer of its family's points recorded than another (a tie decides nothing)."""
    counts = drafts[_family(point.variant.name)]
    mine = counts[point.variant.draft_model or ""]
    return any(n > mine for n in counts.values())
