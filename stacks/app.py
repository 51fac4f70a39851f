"""Assemble the CDK app from a validated configuration: data stack, platform stack, cdk-nag."""

from __future__ import annotations

from aws_cdk import App, Environment, Tags, Validations
from cdk_nag import AwsSolutionsChecks

from config import PlatformConfig

from .data_stack import DataStack
from .nag import acknowledge_findings
from .platform_stack import PlatformStack

DATA_STACK = "SpecDecodeData"
PLATFORM_STACK = "SpecDecodePlatform"


def build_app(app: App, config: PlatformConfig) -> tuple[DataStack, PlatformStack]:
    env = Environment(account=config.env.account, region=config.env.region)
    data = DataStack(app, DATA_STACK, config=config, env=env, description="Spec-decode benchmark: data bucket and results dashboard")
    platform = PlatformStack(
        app,
        PLATFORM_STACK,
        config=config,
        bucket=data.bucket,
        model_cache_role=data.model_cache_role,
        benchmark_role=data.benchmark_role,
        sweep_control_role=data.sweep_control_role,
        env=env,
        description="Spec-decode benchmark: EKS on Trainium2",
    )
    platform.add_stack_dependency(data)
    Tags.of(app).add("project", "specdecode-trn2")
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    acknowledge_findings(platform)
    return data, platform
