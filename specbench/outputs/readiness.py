"""The benchmark Job's readiness wait, published while it lasts: each service's ``ServiceState`` and
``ServiceWaitSeconds`` (outputs/deployment_state.py names them), for the dashboard's top row.

An observer of ``load/endpoints.py`` ``wait_ready``: called after every poll (in a worker thread),
it publishes on the first poll, whenever a service's state changes, at the end of the wait, and
otherwise at most once every ``PUBLISH_EVERY_S`` (60 s). Cost: two custom metrics per service, and
about one PutMetricData call a minute while the services start (CloudWatch prices custom metrics per
metric-month, about $0.30 each, and requests at $0.01 per 1,000:
https://aws.amazon.com/cloudwatch/pricing/ as of 2026; unverified since). Each call holds 2 datums
per service, far under PutMetricData's 1,000 (batched by outputs/cloudwatch.py all the same).

Publishing must never stop the benchmark: a refused or failed call is logged once and the wait goes on.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from typing import Any

from specbench.load.endpoints import serves_other_model
from specbench.outputs import cloudwatch
from specbench.outputs.deployment_state import PUBLISH_EVERY_S, READY, state_datums, state_of

UTC = timezone.utc  # noqa: UP017 - the benchmark Job runs Python 3.10


class ReadinessPublisher:
    def __init__(
        self,
        namespace: str,
        client: Any,
        *,
        every_s: float = PUBLISH_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        log: Callable[[str], None] = print,
        max_attempts: int = 3,
    ) -> None:
        self.namespace, self.client, self.every_s = namespace, client, every_s
        self.clock, self.now, self.log, self.max_attempts = clock, now, log, max_attempts
        self.ready_after: dict[str, float] = {}  # service -> seconds waited when first seen ready
        self.sent: dict[str, tuple[int, float]] | None = None  # the last states published
        self.sent_at = 0.0
        self.calls = self.failures = 0

    @classmethod
    def for_region(cls, namespace: str, region: str | None, **options: Any) -> ReadinessPublisher:
        """A client with botocore's retries off (``publish`` retries) and short timeouts: the wait
        polls its endpoints meanwhile, so a slow CloudWatch costs it seconds, not minutes."""
        import boto3
        from botocore.config import Config

        config = Config(retries={"mode": "standard", "total_max_attempts": 1}, connect_timeout=5, read_timeout=10)
        return cls(namespace, boto3.client("cloudwatch", region_name=region, config=config), **options)

    def states(self, statuses: Mapping[str, str | None], elapsed_s: float, final: bool) -> dict[str, tuple[int, float]]:
        """Per service (state, seconds): a ready service keeps the time it took; the others count on."""
        out = {}
        for service, status in statuses.items():
            if status is None:
                self.ready_after.setdefault(service, elapsed_s)
            state = state_of(status, final, serves_other_model(status))
            out[service] = (state, self.ready_after[service] if state == READY else elapsed_s)
        return out

    def __call__(self, statuses: Mapping[str, str | None], elapsed_s: float, final: bool) -> None:
        states = self.states(statuses, elapsed_s, final)
        changed = self.sent is None or {k: v[0] for k, v in states.items()} != {k: v[0] for k, v in self.sent.items()}
        due = self.clock() - self.sent_at >= self.every_s
        if not (changed or (due and not final)):
            return
        self.sent, self.sent_at = states, self.clock()
        self.calls += 1
        report = cloudwatch.publish(
            self.client, self.namespace, state_datums(states, self.now()), max_attempts=self.max_attempts, max_delay_s=2.0
        )
        if not report.ok:
            self.failures += 1
            if self.failures == 1:  # once: the wait goes on, and so do the next attempts
                failed = report.failed[0]
                self.log(f"service states not published to CloudWatch {self.namespace}: {failed.error_code}: {failed.message[:200]}")
