"""Retrying AWS calls that failed for transient reasons (throttling, 5xx, dropped connections),
with exponential backoff and jitter. botocore only: the aggregation Lambda ships this module.

Callers make their clients with botocore's own retries off (``total_max_attempts=1``), so the
attempts and waits here are the only ones, and they are counted.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any, TypeVar

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    ReadTimeoutError,
)

T = TypeVar("T")

# Transient failures worth another attempt; anything else (validation, access) fails the same way again.
RETRYABLE_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "RequestLimitExceeded",
        "TooManyRequestsException",
        "SlowDown",  # S3
        "InternalFailure",
        "InternalServiceFault",  # CloudWatch's own 500
        "InternalServiceError",
        "InternalError",
        "ServiceUnavailable",
    }
)
# Connection failures: the request may not have arrived. A read timeout may have landed, so retrying
# a non-idempotent call (PutMetricData) can apply it twice; botocore's own retries do the same.
RETRYABLE_EXCEPTIONS = (EndpointConnectionError, ConnectTimeoutError, ReadTimeoutError, ConnectionClosedError)


def error_code(error: Exception) -> str:
    if isinstance(error, ClientError):
        return str(error.response.get("Error", {}).get("Code", "")) or "Unknown"
    return type(error).__name__


def is_retryable(error: Exception) -> bool:
    if isinstance(error, ClientError):
        status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
        return error_code(error) in RETRYABLE_CODES or status == 429 or status >= 500
    return isinstance(error, RETRYABLE_EXCEPTIONS)


def backoff_delay(attempt: int, base_delay_s: float, max_delay_s: float, rng: random.Random) -> float:
    """Exponential backoff after the ``attempt``-th failure, with jitter: between half and all of it."""
    return min(max_delay_s, base_delay_s * 2 ** (attempt - 1)) * rng.uniform(0.5, 1.0)


class Retrier:
    """Calls a function until it succeeds, a non-transient error occurs, or attempts run out;
    counts calls and retries so a caller can report what a refresh cost."""

    def __init__(
        self,
        *,
        max_attempts: int = 8,
        base_delay_s: float = 0.5,
        max_delay_s: float = 20.0,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self.max_attempts, self.base_delay_s, self.max_delay_s = max_attempts, base_delay_s, max_delay_s
        self.sleep, self.rng = sleep, rng or random.Random()
        self.calls: dict[str, int] = {}
        self.retries = 0

    def call(self, name: str, function: Callable[..., T], **kwargs: Any) -> T:
        for attempt in range(1, self.max_attempts + 1):
            self.calls[name] = self.calls.get(name, 0) + 1
            try:
                return function(**kwargs)
            except (ClientError, BotoCoreError) as error:
                if not is_retryable(error) or attempt == self.max_attempts:
                    raise
                self.retries += 1
                self.sleep(backoff_delay(attempt, self.base_delay_s, self.max_delay_s, self.rng))
        raise AssertionError("unreachable")  # the loop returns or raises

    @property
    def total_calls(self) -> int:
        return sum(self.calls.values())
