"""What preflight checks, derived from the deploy's configuration and cdk.out's manifest (pure).

``Target`` is built from a validated ``config.PlatformConfig`` (passed in: this module does not
import the configuration package, which only a checkout has) and the context keys the user set.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .checks import (
    DEFAULT_QUALIFIER,
    DEFAULT_TOOLKIT_STACK,
    QUALIFIER_CONTEXT,
    SYNTHESIZER_MIN_BOOTSTRAP_VERSION,
    SYNTHESIZER_MIN_LOOKUP_BOOTSTRAP_VERSION,
)

# The app's stacks (stacks/app.py DATA_STACK, PLATFORM_STACK; a test keeps them equal).
APP_STACKS = ("SpecDecodeData", "SpecDecodePlatform")
DATA_STACK_BUCKET_OUTPUT = "DataBucketName"  # stacks/data_stack.py CfnOutput
NEURON_CHART = "oci://public.ecr.aws/neuron/neuron-helm-chart"  # stacks/addons/neuron_helm.py
# The pinned EKS add-ons: name -> the setting that pins it (stacks/addons/versions.py).
ADDON_SETTINGS = {
    "vpc-cni": "addons.vpc_cni_version",
    "aws-mountpoint-s3-csi-driver": "addons.mountpoint_s3_csi_version",
    "amazon-cloudwatch-observability": "addons.cloudwatch_observability_version",
}
# The planned run when no sweep is configured: creating the cluster and node groups (the README:
# "30+ minutes before the cluster exists"), the services' first start (Neuron compilation:
# sweep.compile_minutes_per_variant), and the benchmark of the whole suite at one load level
# (sweep.measure_minutes_per_point).
DEPLOY_MINUTES = 45.0


@dataclass(frozen=True)
class BootstrapRequirement:
    required: int
    recommended: int
    qualifier: str
    source: str


def bootstrap_requirement(manifest: Mapping[str, Any] | None, context_qualifier: str = "") -> BootstrapRequirement:
    """The bootstrap version the synthesized app needs: the largest ``requiresBootstrapStackVersion``
    of cdk.out/manifest.json's stack and asset artifacts (their lookup roles' as the recommendation),
    or the DefaultStackSynthesizer's own minimums when nothing is synthesized. A qualifier set in the
    context wins over the manifest's: `cdk deploy` synthesizes again with it (cdk.out may be older)."""
    qualifier = context_qualifier or DEFAULT_QUALIFIER
    if not manifest:
        return BootstrapRequirement(
            SYNTHESIZER_MIN_BOOTSTRAP_VERSION,
            SYNTHESIZER_MIN_LOOKUP_BOOTSTRAP_VERSION,
            qualifier,
            "the DefaultStackSynthesizer's minimum; no cdk.out/manifest.json",
        )
    required, recommended = 0, 0
    for artifact in (manifest.get("artifacts") or {}).values():
        properties = artifact.get("properties") or {}
        if isinstance(properties.get("requiresBootstrapStackVersion"), int):
            required = max(required, properties["requiresBootstrapStackVersion"])
        parameter = str(properties.get("bootstrapStackVersionSsmParameter", ""))
        if parameter.startswith("/cdk-bootstrap/") and parameter.endswith("/version") and not context_qualifier:
            qualifier = parameter.split("/")[2]
        lookup = properties.get("lookupRole") or {}
        if isinstance(lookup.get("requiresBootstrapStackVersion"), int):
            recommended = max(recommended, lookup["requiresBootstrapStackVersion"])
    if required == 0:
        return BootstrapRequirement(
            SYNTHESIZER_MIN_BOOTSTRAP_VERSION,
            max(recommended, SYNTHESIZER_MIN_LOOKUP_BOOTSTRAP_VERSION),
            qualifier,
            "the DefaultStackSynthesizer's minimum; cdk.out names none",
        )
    return BootstrapRequirement(required, max(required, recommended), qualifier, "cdk.out/manifest.json")


def read_manifest(cdk_out: Path) -> dict | None:
    """cdk.out/manifest.json, or None when the app was not synthesized there (or it is unreadable)."""
    try:
        data = json.loads((cdk_out / "manifest.json").read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


@dataclass(frozen=True)
class Target:
    """Everything preflight compares the account with."""

    account: str  # env.account as the user set it ("" = the credentials' account)
    region: str
    region_configured: bool
    availability_zones: tuple[str, ...]
    neuron_type: str
    neuron_zone: str
    neuron_desired: int
    neuron_max: int
    system_type: str
    system_desired: int
    system_max: int
    capacity_mode: str
    reservation_id: str
    kubernetes_version: str
    addons: tuple[tuple[str, str, str], ...]  # (add-on name, setting, pinned version)
    hf_token_secret_arn: str
    images: tuple[tuple[str, str], ...]  # (what pulls it, image)
    chart: str
    stacks: tuple[str, ...]
    toolkit_stack: str
    bootstrap: BootstrapRequirement
    run_hours: float
    run_source: str


def pulled_images(config: Any, baseline_image: str = "") -> tuple[tuple[str, str], ...]:
    """The images the deploy pulls, as charts/ render them (charts/spec.py: the model cache runs the
    serving image; a cross-stack baseline its own stack's image, ``baseline_image``)."""
    s, a, b = config.serving, config.addons, config.benchmark
    images = [("serving image", s.image)]
    if baseline_image and baseline_image != s.image:
        images.append(("baseline image", baseline_image))
    images.append(("benchmark image", b.image))
    # Every pod that runs project code fetches it with this image first (charts/code.py); the
    # model-cache Job always does, and reads the token secret with it when one is set.
    images.append(("AWS CLI image (code fetch, token reader)", s.aws_cli_image))
    if a.neuron_scheduler:
        images.append(("neuron scheduler", a.neuron_scheduler_image))
    return tuple(images)


def run_estimate(config: Any, sweep_wall_hours: float | None) -> tuple[float, str]:
    """Hours the Neuron capacity must last from the start of the deploy."""
    s = config.sweep
    minutes = DEPLOY_MINUTES + s.compile_minutes_per_variant + s.measure_minutes_per_point
    source = (
        f"deploy {DEPLOY_MINUTES:g} min + first compile {s.compile_minutes_per_variant:g} min"
        f" + benchmark {s.measure_minutes_per_point:g} min"
    )
    if sweep_wall_hours is not None:
        return minutes / 60 + sweep_wall_hours, f"{source} + the sweep plan's {sweep_wall_hours:.1f} h"
    return minutes / 60, source


def build_target(
    config: Any,
    context: Mapping[str, Any],
    *,
    manifest: Mapping[str, Any] | None,
    toolkit_stack: str = "",
    baseline_image: str = "",
    sweep_wall_hours: float | None = None,
    run_hours: float | None = None,
) -> Target:
    """The Target of a validated configuration; ``context`` tells what the user set explicitly."""
    n, sysn = config.neuron_nodes, config.system_nodes
    hours, source = run_estimate(config, sweep_wall_hours)
    if run_hours is not None:
        hours, source = run_hours, "--run-hours"
    return Target(
        account=str(context.get("env.account", "") or "").strip(),
        region=config.env.region,
        region_configured=bool(str(context.get("env.region", "") or "").strip()),
        availability_zones=tuple(config.env.availability_zones),
        neuron_type=n.instance_type,
        neuron_zone=n.availability_zone,
        neuron_desired=n.desired_size,
        neuron_max=n.max_size,
        system_type=sysn.instance_type,
        system_desired=sysn.desired_size,
        system_max=sysn.max_size,
        capacity_mode=n.capacity_mode,
        reservation_id=n.capacity_reservation_id,
        kubernetes_version=config.cluster.kubernetes_version,
        addons=tuple((name, key, getattr(config.addons, key.split(".", 1)[1])) for name, key in ADDON_SETTINGS.items()),
        hf_token_secret_arn=config.serving.hf_token_secret_arn,
        images=pulled_images(config, baseline_image),
        chart=f"{NEURON_CHART} --version {config.addons.neuron_helm_chart_version}",
        stacks=APP_STACKS,
        toolkit_stack=toolkit_stack or DEFAULT_TOOLKIT_STACK,
        bootstrap=bootstrap_requirement(manifest, str(context.get(QUALIFIER_CONTEXT, "") or "")),
        run_hours=hours,
        run_source=source,
    )
