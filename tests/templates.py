"""Small queries over synthesized CloudFormation templates (plain dicts, no jsii round-trips)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any


def resources(template: dict, kind: str) -> dict[str, dict]:
    return {lid: r for lid, r in template["Resources"].items() if r["Type"] == kind}


def only(template: dict, kind: str, where: Callable[[dict], bool] = lambda r: True) -> tuple[str, dict]:
    """The single resource of ``kind`` matching ``where``; fails if there are none or several."""
    found = [(lid, r) for lid, r in resources(template, kind).items() if where(r)]
    assert len(found) == 1, f"expected one {kind}, found {[lid for lid, _ in found]}"
    return found[0]


def props(resource: dict) -> dict:
    return resource.get("Properties", {})


def refs(value: Any) -> Iterator[str]:
    """Logical ids a value points at through Ref or Fn::GetAtt."""
    if isinstance(value, dict):
        if "Ref" in value and isinstance(value["Ref"], str):
            yield value["Ref"]
        if "Fn::GetAtt" in value:
            target = value["Fn::GetAtt"]
            yield target[0] if isinstance(target, list) else target.split(".")[0]
        for inner in value.values():
            yield from refs(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from refs(inner)


def direct_dependencies(template: dict, logical_id: str) -> set[str]:
    resource = template["Resources"][logical_id]
    depends = resource.get("DependsOn", [])
    depends = [depends] if isinstance(depends, str) else list(depends)
    own = set(refs(resource.get("Properties", {})))
    return {d for d in set(depends) | own if d in template["Resources"]}


def all_dependencies(template: dict, logical_id: str) -> set[str]:
    """Everything ``logical_id`` waits for on create, hence outlives it on delete."""
    seen: set[str] = set()
    stack = [logical_id]
    while stack:
        for dep in direct_dependencies(template, stack.pop()):
            if dep not in seen:
                seen.add(dep)
                stack.append(dep)
    return seen
