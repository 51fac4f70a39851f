"""Load levels as a reader meets them: a level's label (``c4``: 4 requests in flight per server,
closed loop; ``r2p5``: 2.5 requests/s per server, open loop; specbench.load.types.LoadSpec.level)
said per server and per node, levels in load order, and where a verdict changes with the load.

Every service is one server (one vLLM pod, charts/vllm.py ``replicas: 1``) and the load generator
drives each service at the level, so the level is per server; per node is that times the servers
that fit a node, the same factor the tokens per second per node use (analysis.cost).

Standard library only: the aggregation Lambda ships this module.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from specbench.analysis import stats


def parse_level(label: str) -> tuple[str, float] | None:
    """``c4`` -> ("c", 4.0), ``r2p5`` -> ("r", 2.5); None for a label that is neither."""
    if len(label) < 2 or label[0] not in "cr":
        return None
    try:
        value = float(label[1:].replace("p", "."))
    except ValueError:
        return None
    return (label[0], value) if math.isfinite(value) and value > 0 else None


def level_key(label: str) -> tuple[int, float, str]:
    """Sort key: closed-loop levels by concurrency, then open-loop ones by rate, then anything else."""
    parsed = parse_level(label)
    if parsed is None:
        return (2, 0.0, label)
    return (0 if parsed[0] == "c" else 1, parsed[1], label)


def in_load_order(labels: Iterable[str]) -> list[str]:
    return sorted(dict.fromkeys(labels), key=level_key)


def describe_level(label: str, servers_per_node: int) -> str:
    """``c4: 4 in flight per server, 8 per node`` at 2 servers per node; the label alone when it
    says no load (an import without its concurrency)."""
    parsed = parse_level(label)
    if parsed is None:
        return label
    kind, value = parsed
    per_node = value * servers_per_node
    if kind == "c":
        return f"{label}: {value:g} in flight per server, {per_node:g} per node"
    return f"{label}: {value:g} requests/s per server, {per_node:g} per node"


FASTER, SLOWER, UNCLEAR, NO_CI, NOT_MEASURED = "faster", "slower", "no clear difference", "no CI", "not measured"


def outcome(interval: stats.Interval) -> str:
    """What a speedup's interval says: faster (all of it above 1), slower (all below), no clear
    difference, no CI (too few requests) or not measured."""
    if interval.point is None:
        return NOT_MEASURED
    if not interval.known:
        return NO_CI
    assert interval.low is not None and interval.high is not None
    return FASTER if interval.low > 1 else SLOWER if interval.high < 1 else UNCLEAR


def where_it_changes(outcomes: Sequence[tuple[str, str]]) -> str:
    """(level, outcome) in load order -> ``faster at c1 and c2, slower at c8`` when the outcome
    changes with the load; ``faster at every load`` when it does not; "" for no levels."""
    if not outcomes:
        return ""
    if len({o for _, o in outcomes}) == 1:
        return f"{outcomes[0][1]} at every load"
    runs: list[tuple[str, list[str]]] = []
    for level, said in outcomes:
        if runs and runs[-1][0] == said:
            runs[-1][1].append(level)
        else:
            runs.append((said, [level]))
    return ", ".join(f"{said} at {_and(levels)}" for said, levels in runs)


def _and(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
