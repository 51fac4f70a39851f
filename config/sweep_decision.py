"""What a staged sweep decides with, as plain data (issue 36).

``specbench sweep next`` (from a checkout) and the in-cluster controller (specbench/outputs/sweep_controller.py,
in a pod without ``config/``) decide with the same ``sweep_next.Inputs``: this module computes them
from the configuration as a JSON-able dict, the chart puts that dict in the controller's settings,
and ``controller.inputs_from_settings`` turns it back into the Inputs.
"""

from __future__ import annotations

from typing import Any

from specbench.sweep import staged

from .cost import node_price
from .model import PlatformConfig
from .sweep import mix_weights, packing, slots_per_node, stage_costing, stage_one_variants, staged_cost, sweep_variants


def decision_settings(config: PlatformConfig, price_per_node_hour: float | None = None) -> dict[str, Any]:
    """The Inputs of ``sweep next`` as data; ``price_per_node_hour`` None: the configured node price."""
    s = config.sweep
    price = node_price(config)[0] if price_per_node_hour is None else price_per_node_hour
    slots = sum(slots_per_node(config) or ())
    estimates, nodes, precompiled = stage_costing(config) if slots else (staged.DEFAULT_ESTIMATES, 1, [])
    plan = staged_cost(config) if slots else None
    return {
        "variants": [v.to_dict() for v in sweep_variants(config)],
        "concurrencies": list(s.concurrencies),
        "request_rates": list(s.request_rates),
        "objective": {
            "weights": mix_weights(config),
            "price_per_node_hour": price or None,
            "slo_tpot_s": s.slo_tpot_ms / 1000,
            "slo_ttft_s": s.slo_ttft_ms / 1000,
        },
        "slots": max(slots, 1),
        "margin": s.decision_margin,
        "namespace": config.serving.namespace,
        "estimates": {
            "compile_minutes": estimates.compile_minutes,
            "start_minutes": estimates.start_minutes,
            "measure_minutes": estimates.measure_minutes,
        },
        "nodes": nodes,
        "precompiled": [{"draft": c.draft, "k": c.k, "method": c.method} for c in precompiled],
        "plan": None if plan is None else {"stage_one": plan.stage_one, "expected": plan.expected, "worst": plan.worst, "grid": plan.grid},
        "budget_node_hours": s.budget_node_hours,
        "stage_one": [v.to_dict() for v in stage_one_variants(config)],
        # Units of several TPs (sweep.tensor_parallel_sizes): each node's free room and each TP's pod; null without.
        "packing": packing_settings(config),
    }


def packing_settings(config: PlatformConfig) -> dict[str, Any] | None:
    found = packing(config) if sum(slots_per_node(config) or ()) else None
    if found is None:
        return None
    room = lambda r: [r.devices, r.cpu_millis, r.memory_mib]  # noqa: E731
    return {
        "free": [room(r) for r in found.free],
        "demand": [[tp, *room(r)] for tp, r in found.demand],
        "devices_per_node": found.devices_per_node,
    }
