"""What a staged sweep is pinned to, and what its stage documents say it did (issue 33).

A staged sweep decides for one objective over one catalogue: the first ``sweep next`` stores both
(``pinned`` in after-stage-1.json: the traffic mix, node price, servers per node, SLOs, decision
margin, variants and loads) and every later step must be given the same, or is refused with the
difference: a silent re-decision under other settings would rewrite a plan half run. From the
documents in stage order: which stage measured each configuration, the stage after which each
load's current decision was made (and has held since), and the measurements an earlier decision
used that are no longer among the usable points.

Pure: specbench/outputs/sweep_next.py reads and writes the documents.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from specbench.sweep import staged
from specbench.sweep.points import Load, SweepVariant


def pinned(
    objective: staged.Objective, margin: float, servers_per_node: int, variants: Sequence[SweepVariant], loads: Sequence[Load]
) -> dict[str, Any]:
    return {
        "weights": objective.normalised(),
        "price_per_node_hour": objective.price_per_node_hour,
        "servers_per_node": servers_per_node,
        "slo_tpot_s": objective.slo_tpot_s,
        "slo_ttft_s": objective.slo_ttft_s,
        "decision_margin": margin,
        "variants": [v.to_dict() for v in variants],
        "loads": [load.label for load in loads],
    }


def recorded(doc: Mapping[str, Any]) -> dict[str, Any]:
    """What a stage document pins: its ``pinned``, or (a document from before it was stored) its
    objective's fields and its catalogue."""
    if isinstance(doc.get("pinned"), dict):
        return dict(doc["pinned"])
    objective = doc.get("objective") or {}
    out = {key: objective[key] for key in ("weights", "price_per_node_hour", "slo_tpot_s", "slo_ttft_s") if key in objective}
    if isinstance(doc.get("catalogue"), list):
        out["variants"] = doc["catalogue"]
    return out


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool) and not isinstance(b, bool):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _short(value: Any) -> str:
    if isinstance(value, list) and value and isinstance(value[0], dict):
        tp = lambda v: f"@tp{v['tp']}" if v.get("tp") else ""  # noqa: E731
        return "[" + ", ".join(f"{v.get('name')}={v.get('draft_model') or '-'}:{v.get('k')}{tp(v)}" for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {format(v, '.3g') if isinstance(v, float) else v}" for k, v in sorted(value.items())) + "}"
    return str(value)


# Each pinned field as the user sets it (a difference names the setting or flag to change back).
SETTING = {
    "weights": "sweep.class_weights (weights)",
    "price_per_node_hour": "node price (--node-price-per-hour, results.node_price_per_hour)",
    "servers_per_node": "servers per node (the points' recorded deployment)",
    "slo_tpot_s": "sweep.slo_tpot_ms (in s)",
    "slo_ttft_s": "sweep.slo_ttft_ms (in s)",
    "decision_margin": "sweep.decision_margin",
    "variants": "sweep.variants (and sweep.tensor_parallel_sizes)",
    "loads": "sweep.concurrencies, sweep.request_rates (loads)",
}


def differences(started: Mapping[str, Any], now: Mapping[str, Any]) -> list[str]:
    """``setting: started -> now`` for every pinned field that differs (a field the stored document
    lacks, from an older version, is not compared)."""
    return [
        f"{SETTING.get(key, key)}: {_short(started[key])} -> {_short(now.get(key))}"
        for key in started
        if not _same(started[key], now.get(key))
    ]


def stage_of(documents: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Configuration label -> the stage that measured it: stage 1 measured what the first document
    found measured, stage n what document n - 1 proposed."""
    out: dict[str, int] = {}
    if not documents:
        return out
    for d in (documents[0].get("decisions") or {}).values():
        for e in d.get("estimates", []):
            if e.get("measured") and e.get("config") != staged.BASELINE.label:
                out.setdefault(e["config"], 1)
    for doc in documents:
        nxt = doc.get("next_stage") or {}
        for v in nxt.get("variants") or []:
            out.setdefault(label_of(v), int(nxt.get("stage") or 0))
    return out


def label_of(variant: Mapping[str, Any]) -> str:
    draft, tp = str(variant.get("draft_model") or ""), int(variant.get("tp") or 0)
    return staged.Config(draft, int(variant.get("k") or 0) if draft else 0, str(variant.get("method") or "") if draft else "", tp).label


def decided_in(documents: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Per load, the stage after which its current decision (the last document's best) was made and
    has held in every document since; loads still open are left out."""
    ordered = sorted(documents, key=lambda d: d.get("after_stage", 0))
    if not ordered:
        return {}
    out: dict[str, int] = {}
    for load, last in (ordered[-1].get("decisions") or {}).items():
        if not last.get("made"):
            continue
        since = int(ordered[-1].get("after_stage", 0))
        for doc in reversed(ordered):
            d = (doc.get("decisions") or {}).get(load) or {}
            if not (d.get("made") and d.get("best") == last.get("best")):
                break
            since = int(doc.get("after_stage", 0))
        out[load] = since
    return out


def vanished(documents: Sequence[Mapping[str, Any]], measured_now: Mapping[str, Iterable[str]]) -> list[str]:
    """``<configuration> at <load> (after stage n)`` for every measurement an earlier document
    decided with that the usable points no longer give (``measured_now``: load -> labels)."""
    now = {load: set(labels) for load, labels in measured_now.items()}
    out: dict[tuple[str, str], int] = {}
    for doc in documents:
        for load, d in (doc.get("decisions") or {}).items():
            for e in d.get("estimates", []):
                if e.get("measured") and e.get("config") not in now.get(load, set()):
                    out.setdefault((e["config"], load), int(doc.get("after_stage", 0)))
    return [f"{config} at {load} (used after stage {stage})" for (config, load), stage in sorted(out.items())]
