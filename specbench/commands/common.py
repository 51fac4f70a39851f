"""What several commands share: the price flags' types, the run locations, the AWS check, the
event loop, and main()'s last word on an exception no command handled (cli.py).

In the pods' zip (``run`` and ``publish`` use it), so nothing here imports config/ or matplotlib,
even lazily (specbench/bundle.py follows lazy imports too).
"""

from __future__ import annotations

import argparse
import sys

from specbench.analysis import prices
from specbench.commands import EXIT_CRASHED, EXIT_USAGE
from specbench.flags import ascii_int, finite_number
from specbench.names import allowed, echo, name_problem


def node_price(text: str) -> float:
    """--node-price-per-hour: 0 (no price: cost not computed) or a plausible USD per node-hour for
    some Trainium type (specbench/analysis/prices.py); the commands check the run's own type."""
    return finite_number(text, lambda v: not prices.price_problem(v), prices.price_allowed())


def servers_count(text: str) -> int:
    """--servers-per-node: a whole number from 1 (it divides) to one server per logical core."""
    value = ascii_int(text)
    if prices.servers_problem(value):
        raise argparse.ArgumentTypeError(f"{text}: {prices.servers_problem(value)}; allowed: {prices.servers_allowed()}")
    return value


PRICE_HELP = (
    "USD per hour of one Neuron node, for the cost per million output tokens (0: no price, cost not computed; "
    "default: the price the run's settings recorded, results.node_price_per_hour)"
)


def _cost_problem(cost: dict, source: str, price: float | None) -> str:
    """Why a settings snapshot's cost inputs (and a flag's price for its instance type) are unusable, or ""."""
    instance = cost.get("instance_type") if isinstance(cost.get("instance_type"), str) else ""
    recorded, servers, cores = cost.get("node_price_per_hour"), cost.get("servers_per_node"), cost.get("logical_cores_per_node")
    if price is None and recorded is not None and (problem := prices.price_problem(recorded, instance)):  # a flag replaces it
        return f"--settings: cost.node_price_per_hour {recorded!r} {problem}; allowed: {prices.price_allowed(instance)}"
    if servers is not None and (problem := prices.servers_problem(servers, cores)):
        return f"--settings: cost.servers_per_node {servers!r} {problem}; allowed: {prices.servers_allowed(cores)}"
    if price is not None and (problem := prices.price_problem(price, instance)):
        return f"{source} {price:g}: {problem}; allowed: {prices.price_allowed(instance)}"
    return ""


def with_price(settings: dict, price: float | None, source: str) -> dict:
    """The settings snapshot with ``price`` (from a flag) recorded as the run's node price; ValueError
    (one line) when its cost inputs, or the flag's price for its instance type, are unusable."""
    if settings.get("cost") is not None and not isinstance(settings.get("cost"), dict):
        raise ValueError(f"--settings: cost is {type(settings['cost']).__name__}, expected an object (node_price_per_hour, ...)")
    cost = dict(settings.get("cost") or {})
    problem = _cost_problem(cost, source, price)
    if problem:
        raise ValueError(problem)
    if price is None:
        return settings
    cost.pop("price_entry", None)  # the catalog's entry is no longer the price
    cost.update(node_price_per_hour=price, price_source=source if price > 0 else f"no price ({source} 0): cost not computed")
    return {**settings, "cost": cost}


def add_checkout_arguments(parser: argparse.ArgumentParser) -> None:
    """``-c KEY=VALUE`` and ``--cdk-json``: the settings of the commands that read the configuration
    from a checkout (plan, predict, preflight, sweep next; commands/checkout.py reads them)."""
    parser.add_argument("-c", "--context", action="append", default=[], metavar="KEY=VALUE", help="a setting, as with cdk -c")
    parser.add_argument("--cdk-json", default="", help="the project's cdk.json (default: the checkout's)")


def aws_problem(region: str | None) -> str | None:
    """Why CloudWatch cannot be called from here (no region, no credentials), or None."""
    import boto3

    session = boto3.Session(region_name=region)
    if not session.region_name:
        return "no AWS region: pass --region or set AWS_REGION"
    if session.get_credentials() is None:
        return "no AWS credentials found (environment, profile, Pod Identity or instance role)"
    return None


def print_skipped(read: list, limit: int = 5) -> None:  # type: ignore[type-arg]
    """What the readers left out of ``read`` (RunFiles): the first ``limit`` parts by ``file:line``
    and reason, then the counts; to stderr, nothing when nothing was left out."""
    skipped = [(files.keys_prefix + str(s)) for files in read for s in files.skipped]
    for line in skipped[:limit]:
        print(f"specbench: skipped {line}", file=sys.stderr)
    if skipped:
        used, lines = sum(len(f.records) for f in read), sum(f.record_lines for f in read)
        print(
            f"specbench: {used} of {lines} stored records used; {len(skipped)} damaged or impossible parts left out"
            + (f" ({len(skipped) - limit} more not listed here)" if len(skipped) > limit else ""),
            file=sys.stderr,
        )


def report_store(run: str, results: str | None, region: str | None):  # type: ignore[no-untyped-def]
    """The RunStore of ``specbench report RUN``: RUN is a location ending in the run id (as for
    ``publish``), or a bare run id inside ``results``. Raises ValueError on a malformed location."""
    from specbench.results.store import RunStore, open_store

    text = run.rstrip("/")
    if not text:
        raise ValueError("report expects a run id or a run location")
    problem = name_problem(text.rpartition("/")[2])
    if problem:
        raise ValueError(f"report {echo(run)}: the run id {problem} (allowed: {allowed()})")
    if "/" not in text:
        return RunStore(open_store(results or "results", region), text)
    if results is not None:
        raise ValueError(f"{run!r} is a run location: --results applies only to a bare run id")
    if text.startswith("s3://") and "/" not in text[len("s3://") :]:
        raise ValueError(f"run location {run!r}: expected s3://BUCKET/PREFIX/RUN_ID")
    location, _, run_id = text.rpartition("/")
    return RunStore(open_store(location or "/", region), run_id)


def flag_price(value: float, flag: str, deployment: dict | None = None):  # type: ignore[no-untyped-def]
    """A --node-price-per-hour as the NodePrice of a report; exit 2 with one line (as argparse's own
    errors) when it is implausible for the run's instance type (its settings' cost.instance_type)."""
    from specbench.analysis.cost import NodePrice

    cost = (deployment or {}).get("cost") or {}
    instance = cost.get("instance_type") if isinstance(cost, dict) and isinstance(cost.get("instance_type"), str) else ""
    if problem := prices.price_problem(value, instance):
        print(f"specbench: {flag} {value:g}: {problem}; allowed: {prices.price_allowed(instance)}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)
    return NodePrice(value if value > 0 else None, flag if value > 0 else f"no price ({flag} 0)")


def run_coroutine(coroutine):  # type: ignore[no-untyped-def]
    """asyncio.run, on uvloop where it is installed (specbench/requirements.txt; not on Windows).

    The client stamps every streamed chunk on the event loop, so the loop's own cost per network
    read is timing error under load: uvloop (libuv) cuts it (scripts/bench_chunk_lag.py, README).
    ``uvloop.run`` is asyncio.run with uvloop's loop (MagicStack/uvloop uvloop/__init__.py, 0.18+);
    signal handlers and threads (asyncio.to_thread) work as on asyncio's loop."""
    import asyncio

    try:
        import uvloop
    except ImportError:
        return asyncio.run(coroutine)
    return uvloop.run(coroutine)


def exit_code(error: Exception) -> int:
    """What main() prints and returns for an exception no command handled: one line, never a traceback."""
    from specbench.prompts.datasets import DatasetError
    from specbench.prompts.suite import SuiteError
    from specbench.results.store import StoreError

    if isinstance(error, (SuiteError, DatasetError)):
        print(f"specbench: {error}", file=sys.stderr)
        return EXIT_USAGE
    if isinstance(error, StoreError):  # a results location that cannot be written (import-llmperf, publish)
        print(f"specbench: {error}", file=sys.stderr)
        return EXIT_CRASHED
    print(f"specbench: unexpected {type(error).__name__}: {error}", file=sys.stderr)
    return EXIT_CRASHED
