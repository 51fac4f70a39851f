"""Helpers over rendered Kubernetes objects: quantities, pod requests, and a field-level diff."""

from __future__ import annotations

import json
import re
from typing import Any

_SUFFIX = {"m": 0.001, "": 1, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 1e3, "M": 1e6, "G": 1e9}


def quantity(text: str) -> float:
    """A Kubernetes resource quantity ("100m", "90", "900Gi") as a number (cores or bytes)."""
    number, suffix = re.fullmatch(r"([0-9.]+)([A-Za-z]*)", str(text)).groups()  # type: ignore[union-attr]
    return float(number) * _SUFFIX[suffix]


def pod_requests(pod_spec: dict) -> dict[str, float]:
    """Effective requests of a pod: the larger of (containers + sidecars) and, for each regular init
    container, its own plus the sidecars started before it. Sidecars (init containers with
    restartPolicy Always) keep running beside the containers (kubernetes.io/docs/concepts/workloads/
    pods/sidecar-containers/, "Resource sharing within containers")."""

    def requests(container: dict) -> dict[str, float]:
        return {k: quantity(v) for k, v in container.get("resources", {}).get("requests", {}).items()}

    def add(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
        return {k: a.get(k, 0) + b.get(k, 0) for k in a.keys() | b.keys()}

    total: dict[str, float] = {}
    for container in pod_spec["containers"]:
        total = add(total, requests(container))
    sidecars: dict[str, float] = {}
    peaks: list[dict[str, float]] = []
    for init in pod_spec.get("initContainers", []):
        if init.get("restartPolicy") == "Always":
            sidecars = add(sidecars, requests(init))
        else:
            peaks.append(add(sidecars, requests(init)))
    total = add(total, sidecars)
    for peak in peaks:
        total = {k: max(total.get(k, 0), peak.get(k, 0)) for k in total.keys() | peak.keys()}
    return total


def flatten(value: Any, path: str = "") -> dict[str, Any]:
    """Leaf paths of an object. Lists of named items are keyed by name; container args become
    flag -> value, and JSON flag values are flattened too, so a diff names the exact setting."""
    out: dict[str, Any] = {}
    if isinstance(value, dict):
        for key, inner in value.items():
            out.update(flatten(inner, f"{path}.{key}" if path else key))
    elif isinstance(value, list) and value and all(isinstance(v, dict) and "name" in v for v in value):
        for item in value:
            out.update(flatten(item, f"{path}[{item['name']}]"))
    elif isinstance(value, list) and path.endswith(".args"):
        flag_values = {i + 1 for i, a in enumerate(value) if a.startswith("--")}
        out[f"{path}.<positional>"] = [a for i, a in enumerate(value) if not a.startswith("--") and i not in flag_values]
        for flag, flag_value in zip(value, value[1:], strict=False):
            if flag.startswith("--"):
                try:
                    parsed = json.loads(flag_value)
                except ValueError:
                    parsed = flag_value
                out.update(flatten(parsed, f"{path}.{flag}") if isinstance(parsed, dict) else {f"{path}.{flag}": parsed})
    else:
        out[path] = value
    return out


def differences(a: dict, b: dict) -> set[str]:
    """Paths whose values differ, or that exist on one side only."""
    fa, fb = flatten(a), flatten(b)
    return {k for k in fa.keys() | fb.keys() if fa.get(k, object()) != fb.get(k, object())}


# The labels and annotations a speculative service's Deployment may differ in from the baseline's
# (the parity tests of tests/test_serving_charts.py and tests/test_serving_stacks.py).
VARIANT_LABELS = (
    "app.kubernetes.io/instance",
    "specdecode/variant",
    "specdecode/method",
    "specdecode/draft-model",
    "specdecode/speculative-tokens",
)
VARIANT_ANNOTATIONS = ("specdecode/compiled-artifacts", "specdecode/draft-model", "specdecode/speculator")
