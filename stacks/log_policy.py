"""One retention and removal policy for every log group in a stack, including the ones that
aws-cdk-lib creates itself (the kubectl provider's Lambda logs default to 2 years and Retain,
which would outlive ``cdk destroy``); and the retention enum for a configured period, which
both stacks pass to the log groups they create."""

from __future__ import annotations

import jsii
from aws_cdk import IAspect, RemovalPolicy
from aws_cdk import aws_logs as logs
from constructs import IConstruct

from config import catalog


@jsii.implements(IAspect)
class LogGroupPolicy:
    def __init__(self, retention_days: int) -> None:
        self.retention_days = retention_days

    def visit(self, node: IConstruct) -> None:
        if isinstance(node, logs.CfnLogGroup):
            node.retention_in_days = self.retention_days
            node.apply_removal_policy(RemovalPolicy.DESTROY)


def retention_period(days: int) -> logs.RetentionDays:
    """CloudWatch retention enum for a period in days (config validation allows only these periods)."""
    periods = [r for r in logs.RetentionDays if r is not logs.RetentionDays.INFINITE]
    return dict(zip(catalog.LOG_RETENTION_DAYS, periods, strict=True))[days]
