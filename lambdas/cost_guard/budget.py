"""The cost guard's arithmetic: node-hours from the Neuron instances seen, the budget decision,
the dollars. Pure functions over plain dicts (tests/test_cost_guard.py); no AWS here.

The ledger is the guard's memory, one small JSON object per node group:
    {"instances": {"i-...": {"launch": ISO, "last_seen": ISO}}, "scaled_down_at": ISO | null,
     "notified_at": ISO | null}
An instance counts from its EC2 launch time to the last check that saw it running, so one that
ends between two checks is undercounted by at most one check interval; one that starts and ends
between two checks is not seen at all. EC2 lists a terminated instance only for a while, which is
why the guard keeps its own record instead of re-reading the account's history each time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

UTC = timezone.utc  # noqa: UP017 - the same modules run on Python 3.10
# EC2 instance states that are (or are about to be) billed as running time.
RUNNING_STATES = frozenset({"pending", "running", "stopping", "shutting-down"})


def empty_ledger() -> dict[str, Any]:
    return {"instances": {}, "scaled_down_at": None, "notified_at": None}


def parse_time(text: str) -> datetime:
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        raise ValueError(f"time without a zone: {text!r}")
    return moment.astimezone(UTC)


def read_ledger(data: Mapping[str, Any] | None) -> dict[str, Any]:
    """A stored ledger, checked; a missing one is empty. A malformed one raises ValueError (the
    guard then refuses to decide rather than start counting from zero)."""
    if data is None:
        return empty_ledger()
    instances = data.get("instances")
    if not isinstance(instances, dict):
        raise ValueError("ledger: 'instances' is not an object")
    for iid, seen in instances.items():
        if not isinstance(seen, dict) or parse_time(seen["launch"]) > parse_time(seen["last_seen"]):
            raise ValueError(f"ledger: instance {iid} has no valid launch <= last_seen")
    for key in ("scaled_down_at", "notified_at"):
        if data.get(key) is not None:
            parse_time(data[key])
    return {"instances": dict(instances), "scaled_down_at": data.get("scaled_down_at"), "notified_at": data.get("notified_at")}


def running(instances: Iterable[Mapping[str, Any]]) -> list[tuple[str, datetime]]:
    """(instance id, launch time) of each DescribeInstances instance in a billed state."""
    found = []
    for instance in instances:
        if instance.get("State", {}).get("Name") in RUNNING_STATES:
            launch = instance["LaunchTime"]
            launch = parse_time(launch) if isinstance(launch, str) else launch.astimezone(UTC)
            found.append((instance["InstanceId"], launch))
    return found


def record(ledger: Mapping[str, Any], seen: Iterable[tuple[str, datetime]], now: datetime) -> dict[str, Any]:
    """The ledger after a check at ``now`` saw ``seen`` running; instances not seen keep their record."""
    instances = dict(ledger["instances"])
    for iid, launch in seen:
        instances[iid] = {"launch": launch.isoformat(), "last_seen": max(now, launch).isoformat()}
    return {**ledger, "instances": instances}


def node_hours(ledger: Mapping[str, Any]) -> float:
    seconds = sum((parse_time(s["last_seen"]) - parse_time(s["launch"])).total_seconds() for s in ledger["instances"].values())
    return seconds / 3600.0


def dollars(hours: float, price_per_hour: float | None) -> float | None:
    """Spend at the deployment's node price; None when no price is known (never a guess)."""
    return None if price_per_hour is None else hours * price_per_hour


@dataclass(frozen=True)
class Decision:
    node_hours: float
    budget_node_hours: float  # 0: no budget
    over_budget: bool
    scale_down: bool  # call UpdateNodegroupConfig now
    notify: bool  # publish to the topic now
    reason: str


def decide(
    ledger: Mapping[str, Any], seen: list[tuple[str, datetime]], budget_node_hours: float, *, after_run: bool, scale_after_run: bool
) -> Decision:
    """What a check does. Over budget (node-hours >= the budget, a budget of 0 being none): scale
    down whenever a node is up, whatever the Jobs do, and notify once per node that started since
    the last scale-down. After a run (its publish.json stored): scale down if the setting allows.
    Nothing runs: nothing to scale, so no call (it would start an EKS update for nothing)."""
    hours = node_hours(ledger)
    over = budget_node_hours > 0 and hours >= budget_node_hours
    up = bool(seen)
    newest = max((launch for _, launch in seen), default=None)
    last_down = ledger.get("scaled_down_at")
    # A node launched after our last scale-down was brought back (by hand or a deploy): act again.
    fresh = newest is not None and (last_down is None or newest > parse_time(last_down))
    if over and up:
        notified = ledger.get("notified_at")
        notify = notified is None or (newest is not None and newest > parse_time(notified))
        return Decision(hours, budget_node_hours, True, fresh or notify, notify, f"{hours:.2f} node-hours >= budget {budget_node_hours:g}")
    if after_run and scale_after_run and up:
        why = "the benchmark run finished and its results are stored" if fresh else "already scaled down since the newest node started"
        return Decision(hours, budget_node_hours, over, fresh, False, why)
    if after_run and not scale_after_run:
        return Decision(hours, budget_node_hours, over, False, False, "scale-to-zero after a run is off")
    return Decision(hours, budget_node_hours, over, False, False, "no Neuron node is up" if not up else "within budget")


def after_action(ledger: Mapping[str, Any], decision: Decision, now: datetime) -> dict[str, Any]:
    """The ledger once the decision's calls succeeded."""
    updated = dict(ledger)
    if decision.scale_down:
        updated["scaled_down_at"] = now.isoformat()
    if decision.notify:
        updated["notified_at"] = now.isoformat()
    return updated


def message(decision: Decision, cluster: str, nodegroup: str, price_per_hour: float | None, region: str) -> tuple[str, str]:
    """Subject (SNS allows up to 100 characters) and body of the over-budget notification."""
    spent = dollars(decision.node_hours, price_per_hour)
    cost = f" (about ${spent:,.2f} at ${price_per_hour:g}/node-hour)" if spent is not None and price_per_hour is not None else ""
    subject = f"Neuron nodes of {cluster} scaled to 0: node-hour budget spent"[:100]
    body = (
        f"The Neuron node group {nodegroup} of EKS cluster {cluster} has run {decision.node_hours:.2f} node-hours{cost}, "
        f"at or over its budget of {decision.budget_node_hours:g} (budget.node_hours). The cost guard set its desired size to 0; "
        "the services' pods now wait Pending.\n\n"
        "To bring a node back, raise budget.node_hours and run `cdk deploy`, then:\n"
        f"  aws eks update-nodegroup-config --region {region} --cluster-name {cluster} --nodegroup-name {nodegroup} "
        "--scaling-config desiredSize=1\n"
        "(docs/cost-guard.md)."
    )
    return subject, body
