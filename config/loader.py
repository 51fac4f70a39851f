"""Build a PlatformConfig from CDK context (cdk.json, then ``-c key=value``) and the environment.

Values from cdk.json arrive as JSON types, values from ``-c`` as strings; both are coerced to the
field's declared type here, so a wrong type is reported like any other bad value.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import fields, replace
from typing import Any, get_type_hints

from specbench.analysis import prices

from . import profiles, serving_stacks
from .errors import ConfigError, Problem
from .model import OFFLINE_ACCOUNT, OFFLINE_REGION, PlatformConfig, ServingSettings, sections
from .numbers import parse_float, parse_int
from .validate import validate

_TRUE = ("true", "yes", "1", "on")
_FALSE = ("false", "no", "0", "off")
# What a setting key looks like: section.field. CDK's own context keys (`@aws-cdk/...`,
# `aws:cdk:...`, `availability-zones:account=...`) contain ':' or '/', so they never match.
_SEPARATORS = re.compile(r"[:/]")
_SETTING_SHAPE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*\.[A-Za-z0-9_.-]+\Z", re.ASCII)


# Settings whose refusal names the allowed range even when the value is not a number at all.
ALLOWED_WHEN_UNREADABLE = {"results.node_price_per_hour": prices.price_allowed()}


def all_keys() -> list[str]:
    """Every context key the configuration understands, in documentation order."""
    return [f"{name}.{f.name}" for name, cls in sections().items() for f in fields(cls)]


def load_config(context: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> PlatformConfig:
    """Merge defaults, derived defaults and context; raise ConfigError listing every problem."""
    environ = {} if environ is None else environ
    problems = [p for key in context if (p := unknown_key_problem(key, context[key])) is not None]
    context = profiles.expand(context)  # a profile's values under the explicit ones

    built: dict[str, Any] = {}
    for name, cls in sections().items():
        hints = get_type_hints(cls)
        values = {}
        for f in fields(cls):
            key = f"{name}.{f.name}"
            if key not in context:
                continue
            try:
                values[f.name] = coerce(context[key], hints[f.name])
            except ValueError as err:
                problems.append(Problem(key, context[key], str(err), ALLOWED_WHEN_UNREADABLE.get(key, "")))
        built[name] = cls(**values)
    # Fields with unusable values keep their defaults, so every other rule still gets checked and
    # the user sees all problems at once; rules about (or derived from) a reported field are dropped.
    config = _fill_derived(PlatformConfig(**built), environ)
    problems += validate(config, reported={p.key for p in problems})
    if problems:
        raise ConfigError(problems)
    return config


def unknown_key_problem(key: str, value: Any) -> Problem | None:
    """A context key shaped like a setting that is none: a misspelt field or section."""
    known = all_keys()
    if key in sections():
        return Problem(key, value, "is a section, not a setting", f"one key per field, e.g. {key}.{fields(sections()[key])[0].name}")
    if key in known:
        return None
    # Ours when shaped like a setting, or when it starts with one of our sections however it goes
    # on (':' '/' for '.', spaces around): CDK's own keys (`@aws-cdk/...`, `aws:cdk:...`,
    # `availability-zones:...`) start with none of them.
    spelt = _SEPARATORS.sub(".", key.strip())
    section = spelt.split(".", 1)[0]
    if not _SETTING_SHAPE.match(key) and section not in sections():
        return None
    if spelt in known:
        why = "':' or '/' for '.'" if _SEPARATORS.search(key) else "spaces around it"
        return Problem(key, value, f"is not a setting ({why})", f"did you mean {spelt}?")
    hint = difflib.get_close_matches(spelt, known, n=1)
    if not hint and section not in sections():
        hint = [f"section {s}" for s in difflib.get_close_matches(section, list(sections()), n=1)]
    what = "is not a setting" if section in sections() else f"is not a setting (there is no section {section!r})"
    return Problem(key, value, what, f"did you mean {hint[0]}?" if hint else "a key from the configuration table, docs/configuration.md")


def _fill_derived(config: PlatformConfig, environ: Mapping[str, str]) -> PlatformConfig:
    env = config.env
    # The CDK CLI always sets CDK_DEFAULT_REGION (us-east-1 when nothing is configured) but sets
    # CDK_DEFAULT_ACCOUNT only when credentials resolve; without an account the region is just its
    # fallback, so the offline defaults apply to both.
    resolved = environ.get("CDK_DEFAULT_ACCOUNT")
    region = env.region or (resolved and environ.get("CDK_DEFAULT_REGION")) or OFFLINE_REGION
    env = replace(
        env,
        account=env.account or resolved or OFFLINE_ACCOUNT,
        region=region,
        availability_zones=env.availability_zones or tuple(f"{region}{letter}" for letter in "abc"),
    )
    neuron = config.neuron_nodes
    if not neuron.availability_zone:
        neuron = replace(neuron, availability_zone=env.availability_zones[0])
    addons = config.addons
    if not addons.neuron_scheduler_image:
        addons = replace(addons, neuron_scheduler_image=f"registry.k8s.io/kube-scheduler:v{config.cluster.kubernetes_version}.0")
    # results.node_price_per_hour stays None when left out: config/cost.py node_price takes the price
    # catalog's entry then, so no value of the setting doubles as "not set".
    return replace(config, env=env, neuron_nodes=neuron, addons=addons, serving=_serving_derived(config.serving))


def _serving_derived(s: ServingSettings) -> ServingSettings:
    """The stack's image and default method, the baseline's stack and a known head's target. An
    unknown stack leaves them empty; the serving rules report the stack."""
    stack = serving_stacks.STACKS.get(s.stack)
    return replace(
        s,
        baseline_stack=s.baseline_stack or s.stack,
        image=s.image or (stack.image if stack else ""),
        speculation_method=s.speculation_method or (stack.default_method if stack else ""),
        speculator_head_target=s.speculator_head_target or serving_stacks.KNOWN_HEADS.get(s.speculator_head, ""),
    )


def coerce(value: Any, kind: Any) -> Any:
    """Convert a context value to ``kind`` (str, int, float, bool, or a tuple of str, int or float) or raise ValueError."""
    if kind is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
            return value.strip().lower() in _TRUE
        raise ValueError("expected true or false")
    if kind is int:
        if isinstance(value, bool):
            raise ValueError("expected a whole number")
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            return parse_int(value)
        raise ValueError("expected a whole number")
    if kind == (float | None):  # an optional number: None only when left out, so a value given is a number
        return coerce(value, float)
    if kind is float:
        if isinstance(value, bool):
            raise ValueError("expected a number")
        if isinstance(value, (int, float)):
            try:
                number = float(value)
            except OverflowError:  # an integer of hundreds of digits in cdk.json
                raise ValueError("expected a number within a float's range") from None
            if not math.isfinite(number):  # json.loads reads NaN and Infinity in cdk.json
                raise ValueError("expected a finite number")
            return number
        if isinstance(value, str):
            return parse_float(value)
        raise ValueError("expected a number")
    if kind is str:
        if isinstance(value, str):
            return value.strip()
        raise ValueError("expected text")
    if getattr(kind, "__origin__", None) is tuple:
        item = kind.__args__[0]
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("["):
                try:
                    value = json.loads(text)
                except json.JSONDecodeError as err:
                    raise ValueError(f"expected a JSON list or comma-separated text ({err.msg})") from None
            else:
                value = [part for part in (p.strip() for p in text.split(",")) if part]
        if item is not str:  # tuple[int, ...] or tuple[float, ...]: each item as its scalar
            if not isinstance(value, (list, tuple)):
                raise ValueError(f"expected a list of {'whole numbers' if item is int else 'numbers'}")
            try:
                return tuple(coerce(v, item) for v in value)
            except ValueError as err:
                raise ValueError(f"{err} in every item of the list") from None
        if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
            return tuple(v.strip() for v in value)
        raise ValueError("expected a list of text values")
    raise TypeError(f"unsupported setting type {kind!r}")  # a programming error, not user input
