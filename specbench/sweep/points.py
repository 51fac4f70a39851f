"""Sweep points: a variant (the baseline, or a draft model and k) measured at one load level.

A point's run is a normal specbench run stored under ``<results>/sweeps/<sweep_id>/<point_id>/``;
its run.json carries a ``sweep`` object (``sweep_metadata``) so the analysis knows the variant,
the load and the wave without parsing names.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from specbench.names import echo

BASELINE = "baseline"
# The baseline runs again in the last wave (drift); its points carry this after the variant name.
REPEAT = "last"
LOAD_KINDS = ("concurrency", "rate")
# Sweep ids and variant names become Kubernetes names and S3 key parts: DNS labels.
NAME = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?\Z", re.ASCII)


@dataclass(frozen=True)
class SweepVariant:
    """The baseline (no draft) or a speculative variant, at the services' tensor parallelism (tp 0)
    or at a TP of its own (``sweep.tensor_parallel_sizes``: its own compile, devices and cost)."""

    name: str
    draft_model: str = ""
    k: int = 0
    method: str = ""
    tp: int = 0  # logical cores; 0 = serving.tensor_parallel_size (the reference TP)

    @property
    def is_baseline(self) -> bool:
        return not self.draft_model

    @property
    def compile_key(self) -> tuple[Any, ...]:
        """What besides the shared serving settings changes the compiled graphs (TP among them:
        charts/spec.py ``compile_settings``); (draft, k, method) at the reference TP."""
        return (self.draft_model, self.k, self.method, *((self.tp,) if self.tp else ()))

    def to_dict(self) -> dict[str, Any]:
        # ``tp`` only when it is not the reference TP: documents and run.json of sweeps without TP
        # variants stay as they were (pinning compares them).
        return {
            "name": self.name,
            "draft_model": self.draft_model,
            "k": self.k,
            "method": self.method,
            **({"tp": self.tp} if self.tp else {}),
        }


def tp_name(name: str, tp: int) -> str:
    """A variant's name at another TP: ``q17-k7`` at TP 4 is ``q17-k7-tp4``, the baseline ``baseline-tp4``."""
    return f"{name}-tp{tp}" if tp else name


@dataclass(frozen=True)
class Load:
    kind: str  # concurrency | rate
    value: float

    @property
    def label(self) -> str:
        """``c4`` for 4 in flight, ``r0p5`` for 0.5 requests/s (sweep-common.md)."""
        if self.kind == "concurrency":
            return f"c{int(self.value)}"
        return "r" + format(self.value, "g").replace(".", "p")

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "value": int(self.value) if self.kind == "concurrency" else self.value}


def loads(concurrencies: tuple[int, ...], request_rates: tuple[float, ...]) -> tuple[Load, ...]:
    return tuple(Load("concurrency", c) for c in concurrencies) + tuple(Load("rate", r) for r in request_rates)


def point_id(variant: str, load: Load, repeat: bool = False) -> str:
    """``<variant>-c<n>`` / ``<variant>-r<rate>``; the baseline's last-wave repeat is ``baseline-last-c<n>``."""
    return f"{variant}-{REPEAT}-{load.label}" if repeat else f"{variant}-{load.label}"


def sweep_metadata(sweep_id: str, point: str, wave: int, variant: SweepVariant, load: Load) -> dict[str, Any]:
    """The ``sweep`` object of a point's run.json."""
    return {"sweep_id": sweep_id, "point_id": point, "wave": wave, "variant": variant.to_dict(), "load": load.to_dict()}


def check_sweep_id(sweep_id: str, flag: str = "--sweep-id") -> str:
    """A sweep id becomes part of Job names (charts/sweep.py) and S3 keys: a DNS label, else ValueError naming ``flag``."""
    if not NAME.fullmatch(sweep_id):
        raise ValueError(f"{flag} {echo(sweep_id)}: expected a DNS label (1-63 lowercase letters, digits or '-', starting with a letter)")
    return sweep_id


def parse_sweep_point(sweep_id: str, text: str) -> dict[str, Any]:
    """``--sweep-id`` and ``--sweep-point`` -> the run's ``sweep`` object; ValueError names the flag and what is wrong."""
    check_sweep_id(sweep_id)
    try:
        point = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"--sweep-point: not JSON ({error.msg})") from None
    if not isinstance(point, dict):
        raise ValueError('--sweep-point: expected a JSON object {"point_id", "wave", "variant", "load"}')
    missing = [key for key in ("point_id", "wave", "variant", "load") if key not in point]
    if missing:
        raise ValueError(f"--sweep-point: missing {', '.join(missing)}")
    variant, load = point["variant"], point["load"]
    if not isinstance(point["point_id"], str) or not NAME.fullmatch(point["point_id"]):
        raise ValueError(f"--sweep-point: point_id {echo(point['point_id'])} is not a DNS label")
    if type(point["wave"]) is not int or point["wave"] < 0:
        raise ValueError(f"--sweep-point: wave {point['wave']!r} is not a whole number >= 0")
    if not isinstance(variant, dict) or not isinstance(variant.get("name"), str) or type(variant.get("k", 0)) is not int:
        raise ValueError('--sweep-point: variant must be {"name": text, "draft_model": text, "k": whole number, "method": text}')
    if type(variant.get("tp", 0)) is not int or variant.get("tp", 0) < 0:
        raise ValueError(f"--sweep-point: variant.tp {variant.get('tp')!r} is not a whole number >= 0 (0: the services' TP)")
    if not NAME.fullmatch(variant["name"]):
        raise ValueError(f"--sweep-point: variant.name {echo(variant['name'])} is not a DNS label")
    if variant.get("k", 0) < 0:  # the baseline has none (0), a speculative variant proposes k >= 1 tokens per step
        raise ValueError(f"--sweep-point: variant.k {variant['k']} is negative (allowed: 0 for the baseline, else a whole number >= 1)")
    if not isinstance(load, dict) or load.get("kind") not in LOAD_KINDS:
        raise ValueError(f"--sweep-point: load.kind must be one of {', '.join(LOAD_KINDS)}")
    value = load.get("value")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"--sweep-point: load.value {value!r} is not a number greater than 0")
    parsed = SweepVariant(
        variant["name"], str(variant.get("draft_model", "")), variant.get("k", 0), str(variant.get("method", "")), variant.get("tp", 0)
    )
    return sweep_metadata(sweep_id, point["point_id"], point["wave"], parsed, Load(load["kind"], value))
