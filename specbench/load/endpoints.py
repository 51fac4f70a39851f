"""Talking to an endpoint outside the measured requests: readiness, /metrics, /tokenize."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping

import aiohttp

from specbench import jsonfile
from specbench.load.types import Endpoint


class NotReadyError(RuntimeError):
    """Endpoints that did not become ready in time; the message names each and what it last answered."""


# What ``wait_ready`` tells an observer after each poll: per endpoint name its status (None: ready),
# the seconds since the wait began, and whether this is the wait's last poll (all ready, or it gives up).
Observer = Callable[[Mapping[str, "str | None"], float, bool], None]
SERVES_PREFIX = "serves "  # endpoint_status's answer when /v1/models lists other models


def serves_other_model(status: str | None) -> bool:
    """Whether a status says the endpoint answers but serves other models (a configuration, not a start)."""
    return bool(status) and str(status).startswith(SERVES_PREFIX)


async def endpoint_status(session: aiohttp.ClientSession, endpoint: Endpoint, model: str) -> str | None:
    """None when ready (GET /health is 200 and /v1/models lists ``model``), else what is wrong."""
    try:
        async with session.get(endpoint.url.rstrip("/") + "/health") as response:
            if response.status != 200:
                return f"/health answered {response.status}"
        async with session.get(endpoint.api_base + "/models") as response:
            if response.status != 200:
                return f"/v1/models answered {response.status}"
            served = [item.get("id") for item in (await response.json()).get("data", [])]
    except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as error:
        return f"unreachable ({type(error).__name__}: {error})"[:200]
    return None if model in served else f"{SERVES_PREFIX}{served}, not {model!r}"


async def wait_ready(
    endpoints: list[Endpoint],
    model: str,
    timeout_s: float,
    poll_s: float = 1.0,
    log: Callable[[str], None] = print,
    observe: Observer | None = None,
) -> None:
    """Poll until every endpoint is ready; NotReadyError after ``timeout_s`` (services may be compiling).
    ``observe`` is called after every poll, off the event loop (it may block: outputs/readiness.py publishes)."""
    started = time.monotonic()
    deadline = started + timeout_s
    next_log = 0.0
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
        while True:
            statuses = await asyncio.gather(*(endpoint_status(session, endpoint, model) for endpoint in endpoints))
            waiting = [
                f"{endpoint.name} at {endpoint.url}: {status}" for endpoint, status in zip(endpoints, statuses, strict=False) if status
            ]
            now = time.monotonic()
            if observe is not None:
                seen = {endpoint.name: status for endpoint, status in zip(endpoints, statuses, strict=True)}
                await asyncio.to_thread(observe, seen, now - started, not waiting or now >= deadline)
            if not waiting:
                return
            if now >= deadline:
                raise NotReadyError(f"not ready after {timeout_s:g} s: " + "; ".join(waiting))
            if now >= next_log:
                log("waiting for " + "; ".join(waiting))
                next_log = now + 60
            await asyncio.sleep(min(poll_s, max(0.0, deadline - now)))


async def fetch_metrics(session: aiohttp.ClientSession, endpoint: Endpoint) -> tuple[str | None, str]:
    """(Prometheus text, "") or (None, why it could not be read): absence is reported, never zero."""
    try:
        async with session.get(endpoint.url.rstrip("/") + "/metrics", timeout=aiohttp.ClientTimeout(total=30)) as response:
            if response.status != 200:
                return None, f"/metrics answered {response.status}"
            return await response.text(), ""
    except (aiohttp.ClientError, asyncio.TimeoutError) as error:
        return None, f"/metrics unreachable ({type(error).__name__})"


def tokenize_request(endpoint: Endpoint, model: str, text: str) -> tuple[str, bytes]:
    return endpoint.url.rstrip("/") + "/tokenize", jsonfile.dumps({"model": model, "prompt": text, "add_special_tokens": False}).encode()


async def count_tokens_async(session: aiohttp.ClientSession, endpoint: Endpoint, model: str, text: str, timeout_s: float = 30.0) -> int:
    url, body = tokenize_request(endpoint, model, text)
    timeout = aiohttp.ClientTimeout(total=timeout_s)  # bounded: a /tokenize that hangs costs this, not aiohttp's 5 minutes
    async with session.post(url, data=body, headers={"Content-Type": "application/json"}, timeout=timeout) as response:
        response.raise_for_status()
        count = (await response.json())["count"]
        if type(count) is not int:  # vLLM's TokenizeResponse.count is an int; anything else is no count
            raise ValueError(f"/tokenize answered count {count!r:.40}")
        return count


def token_counter(endpoint: Endpoint, model: str, timeout_s: float = 30.0) -> Callable[[str], int]:
    """A blocking counter with the served model's own tokenizer (vLLM's /tokenize), for sizing prompts."""
    cache: dict[str, int] = {}

    def count(text: str) -> int:
        if text not in cache:
            url, body = tokenize_request(endpoint, model, text)
            request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=timeout_s) as response:  # noqa: S310 - the endpoint's own URL
                cache[text] = int(json.loads(response.read())["count"])
        return cache[text]

    return count


def estimate_tokens(text: str) -> int:
    """Fallback when a server has no /tokenize: about four characters a token (recorded as an estimate)."""
    return max(1, round(len(text) / 4))


TokenizeError = (urllib.error.URLError, OSError, KeyError, ValueError)
