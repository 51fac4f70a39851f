"""The services the configuration asks for: the baseline, the speculative service, and any further
speculative variants (another k, another speculator) for sweeps. Every one shares the serving
settings; a variant adds only its speculator (a draft model or a trained head) and k."""

from __future__ import annotations

from dataclasses import dataclass

from . import serving_stacks
from .model import ServingSettings
from .numbers import parse_int


@dataclass(frozen=True)
class ServiceVariant:
    name: str
    # Empty speculator and k 0 for the baseline. The speculator is a draft model or a trained
    # head, as the method says (the field keeps its historical name).
    draft_model: str = ""
    num_speculative_tokens: int = 0
    # The target a trained head was trained for (empty for a draft model or an unknown head).
    speculator_target: str = ""


def parse_extra_variant(text: str) -> ServiceVariant:
    """``NAME:SPECULATOR:K`` -> ServiceVariant; ValueError says what is wrong with the text."""
    parts = text.split(":")
    if len(parts) != 3 or not all(p.strip() for p in parts):
        raise ValueError("is not NAME:SPECULATOR:K")
    name, draft, k = (p.strip() for p in parts)
    try:
        tokens = parse_int(k)
    except ValueError:
        raise ValueError(f"has K={k!r}, not a whole number") from None
    return ServiceVariant(name, draft, tokens)


def speculator(serving: ServingSettings) -> str:
    """The speculative service's speculator under the configured method: the head for a method
    with a trained head, else the draft model."""
    stack = serving_stacks.STACKS.get(serving.stack)
    try:
        kind = stack.method(serving.speculation_method).speculator if stack else serving_stacks.DRAFT_MODEL
    except KeyError:
        kind = serving_stacks.DRAFT_MODEL
    return serving.speculator_head if kind == serving_stacks.TRAINED_HEAD else serving.draft_model


def speculator_target(serving: ServingSettings, head: str) -> str:
    """The target a head was trained for: the configured one for the configured head, else the
    public record (serving_stacks.KNOWN_HEADS)."""
    if head == serving.speculator_head and serving.speculator_head_target:
        return serving.speculator_head_target
    return serving_stacks.KNOWN_HEADS.get(head, "")


def service_variants(serving: ServingSettings) -> list[ServiceVariant]:
    """Baseline first, then the speculative service, then the extra variants that parse."""
    main = speculator(serving)
    variants = [
        ServiceVariant(serving.baseline_service),
        ServiceVariant(serving.speculative_service, main, serving.num_speculative_tokens, speculator_target(serving, main)),
    ]
    for text in serving.extra_speculative_variants:
        try:
            v = parse_extra_variant(text)
        except ValueError:
            continue  # reported by the serving rules
        variants.append(ServiceVariant(v.name, v.draft_model, v.num_speculative_tokens, speculator_target(serving, v.draft_model)))
    return variants
