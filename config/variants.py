"""The services the configuration asks for: the baseline, the speculative service, and any further
speculative variants (another k, another draft) for sweeps. Every one shares the serving settings;
a variant adds only its draft model and k."""

from __future__ import annotations

from dataclasses import dataclass

from .model import ServingSettings


@dataclass(frozen=True)
class ServiceVariant:
    name: str
    # Empty draft and k 0 for the baseline.
    draft_model: str = ""
    num_speculative_tokens: int = 0


def parse_extra_variant(text: str) -> ServiceVariant:
    """``NAME:DRAFT_MODEL:K`` -> ServiceVariant; ValueError says what is wrong with the text."""
    parts = text.split(":")
    if len(parts) != 3 or not all(p.strip() for p in parts):
        raise ValueError("is not NAME:DRAFT_MODEL:K")
    name, draft, k = (p.strip() for p in parts)
    try:
        tokens = int(k)
    except ValueError:
        raise ValueError(f"has K={k!r}, not a whole number") from None
    return ServiceVariant(name, draft, tokens)


def service_variants(serving: ServingSettings) -> list[ServiceVariant]:
    """Baseline first, then the speculative service, then the extra variants that parse."""
    variants = [
        ServiceVariant(serving.baseline_service),
        ServiceVariant(serving.speculative_service, serving.draft_model, serving.num_speculative_tokens),
    ]
    for text in serving.extra_speculative_variants:
        try:
            variants.append(parse_extra_variant(text))
        except ValueError:
            continue  # reported by the serving rules
    return variants
