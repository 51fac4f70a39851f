"""Throughput and cost of output tokens: how many tokens per second a server and a node deliver
while busy, and what a million of them cost at a node's price per hour.

One definition of "busy" for every figure (the run's report and dashboard, the sweep's load table,
the serving model's prediction): a server is busy while at least one of its requests is in flight,
i.e. over the union of the windows [sent, end of stream] of its requests. Idle time between
requests (an open loop at a low rate, the gap between test cases) is not paid for: the figures are
what a node costs per token when it is kept busy at that load, not what an idle deployment costs.

Each request gets its share of the busy time: at every moment the busy time is divided equally
between the requests then in flight, so the shares add up to the union exactly (the point estimate
is the union's). Tokens per second = sum of output tokens / sum of shares, a ratio of sums over
requests, which is what the bootstrap resamples (requests, with their tokens and shares).

Standard library only: the aggregation Lambda ships this module, and the serving model
(``specbench predict``) calls ``cost_per_million_tokens`` with a predicted throughput.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from specbench.analysis import prices, stats
from specbench.results.records import RequestRecord

SECONDS_PER_HOUR = 3600.0
TOKENS_PER_MILLION = 1_000_000.0
NO_PRICE = "not computed (no price)"

BUSY_DEFINITION = (
    "a server is busy while at least one of its requests is in flight: the union of the windows "
    "[request written, end of stream] of its requests (failed ones included when their end is known); "
    "each request's share of it is its window divided, at every moment, by the requests then in flight"
)
FIGURE_DEFINITIONS = {
    "busy_s": BUSY_DEFINITION,
    "tokens_per_s_per_server": "output tokens of successful requests / busy seconds of that server",
    "tokens_per_s_per_node": "tokens_per_s_per_server x servers per node (logical NeuronCores per node // cores per server)",
    "cost_per_million_output_tokens": "node price per hour / 3600 / tokens_per_s_per_node x 1e6 (USD); "
    "'not computed (no price)' without a price, never 0",
    "goodput_cost_per_million_output_tokens": "the same for the tokens of requests within both SLOs (TTFT and TPOT, "
    "sweep.slo_*): busy time of every request over the tokens of those that met the SLOs",
    "cost_saving": "baseline cost per million - speculative cost per million (USD, and % of the baseline's; "
    "positive: the speculative service is cheaper, negative: dearer), "
    "bootstrap CI with each service's requests resampled independently",
}


# --- the arithmetic ------------------------------------------------------------------------------


def cost_per_million_tokens(price_per_hour: float | None, tokens_per_second_per_node: float | None) -> float | None:
    """USD per million output tokens of a node costing ``price_per_hour`` that delivers
    ``tokens_per_second_per_node``; None when either is missing or not positive (never 0)."""
    if price_per_hour is None or tokens_per_second_per_node is None:
        return None
    if not (math.isfinite(price_per_hour) and price_per_hour > 0) or not (
        math.isfinite(tokens_per_second_per_node) and tokens_per_second_per_node > 0
    ):
        return None
    return price_per_hour / SECONDS_PER_HOUR / tokens_per_second_per_node * TOKENS_PER_MILLION


def servers_per_node(logical_cores_per_node: int, cores_per_server: int) -> int:
    """Servers of ``cores_per_server`` logical cores (tensor parallel size) that fit one node;
    ValueError when none fits. trn2.48xlarge at LNC=2: 64 logical cores, TP 32 -> 2."""
    if cores_per_server < 1 or logical_cores_per_node < 1:
        raise ValueError(f"cores per server {cores_per_server} and per node {logical_cores_per_node} must be at least 1")
    fit = logical_cores_per_node // cores_per_server
    if fit < 1:
        raise ValueError(f"a server of {cores_per_server} logical cores does not fit a node of {logical_cores_per_node}")
    return fit


def busy_shares(windows: Sequence[tuple[float, float]]) -> list[float]:
    """Each window's share of the busy time (see the module's docstring); they sum to the length of
    the windows' union. A window of zero or negative length gets 0."""
    if not windows:
        return []
    # F(t) = integral of 1 / (windows open at s) over the busy part of (-inf, t]: share = F(end) - F(start).
    events: dict[float, int] = {}
    for start, end in windows:
        if end > start:
            events[start] = events.get(start, 0) + 1
            events[end] = events.get(end, 0) - 1
    times = sorted(events)
    cumulative: dict[float, float] = {}
    open_now, total, previous = 0, 0.0, None
    for moment in times:
        if previous is not None and open_now > 0:
            total += (moment - previous) / open_now
        cumulative[moment] = total
        open_now += events[moment]
        previous = moment
    return [cumulative[end] - cumulative[start] if end > start else 0.0 for start, end in windows]


def busy_seconds(windows: Sequence[tuple[float, float]]) -> float:
    """The length of the windows' union."""
    return math.fsum(busy_shares(windows))


def window(record: RequestRecord) -> tuple[float, float] | None:
    """[sent, end of stream] in wall-clock seconds; None when the record has no end."""
    if record.end_to_end_latency_s is None or not record.end_to_end_latency_s >= 0:
        return None
    return record.started_at, record.started_at + record.end_to_end_latency_s


def within_slo(record: RequestRecord, ttft_ms: float | None, tpot_ms: float | None) -> bool:
    """A successful request within both limits (a limit that is None is no limit)."""
    if not record.ok:
        return False
    if ttft_ms is not None and (record.ttft_s is None or record.ttft_s * 1000 > ttft_ms):
        return False
    return tpot_ms is None or (record.time_per_output_token_s is not None and record.time_per_output_token_s * 1000 <= tpot_ms)


@dataclass(frozen=True)
class Share:
    """One request's part in its server's throughput."""

    tokens: int  # output tokens of a successful request; 0 for a failed one
    good_tokens: int  # the same when the request met the SLOs, else 0
    busy_s: float  # its share of the server's busy time


def shares(records: Sequence[RequestRecord], ttft_ms: float | None = None, tpot_ms: float | None = None) -> list[Share]:
    """Per request of ONE server, its tokens and busy share, computed over all of them (pass every
    record of the server, then pick subsets: a share depends on what else was in flight)."""
    timed = [(r, w) for r in records if (w := window(r)) is not None]
    busy = busy_shares([w for _, w in timed])
    result = []
    for (record, _), share in zip(timed, busy, strict=True):
        tokens = int(record.output_tokens or 0) if record.ok else 0
        result.append(Share(tokens, tokens if within_slo(record, ttft_ms, tpot_ms) else 0, share))
    return result


def tokens_per_second(items: Sequence[Share], good_only: bool = False) -> float | None:
    """Sum of tokens / sum of busy shares; None without busy time or tokens."""
    busy = math.fsum(s.busy_s for s in items)
    tokens = sum(s.good_tokens if good_only else s.tokens for s in items)
    return tokens / busy if busy > 0 and tokens > 0 else None


def records_throughput(records: Sequence[RequestRecord], servers: int = 1) -> float | None:
    """Output tokens per second per node of one server's records (x ``servers`` per node)."""
    value = tokens_per_second(shares(records))
    return None if value is None else value * servers


# --- the price -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class NodePrice:
    """USD per hour of one node and where that figure came from; per_hour None: no price."""

    per_hour: float | None
    source: str = ""

    @property
    def known(self) -> bool:
        return self.per_hour is not None and self.per_hour > 0

    def describe(self) -> str:
        if not self.known:  # a source that says which price is missing ("no price for ...") is the line
            return self.source if self.source.startswith("no price") else NO_PRICE
        return f"${self.per_hour:.2f} per node-hour" + (f" ({self.source})" if self.source else "")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def price_problem(value: float) -> str:
    """Why a node price given by a person is unusable ("" when it is fine): 0 means no price."""
    if not math.isfinite(value) or value < 0:
        return "must be a number >= 0 (USD per node-hour; 0 = no price, cost not computed)"
    return ""


UNKNOWN_SOURCE = "source unknown: the run recorded none"


def _section(settings: Mapping[str, Any] | None, name: str) -> Mapping[str, Any]:
    """One object of a run's settings; {} when absent or not an object (a damaged file)."""
    value = settings.get(name) if isinstance(settings, Mapping) else None
    return value if isinstance(value, Mapping) else {}


def recorded_price(settings: Mapping[str, Any] | None, as_of: str = "") -> NodePrice:
    """The price a run's settings snapshot recorded (``cost.node_price_per_hour`` and its source);
    NodePrice(None) when there is none (a run before prices were recorded, an import) or it is
    refused (specbench.analysis.prices: not a number, negative, implausible for ``cost.instance_type``).
    A catalog entry (``cost.price_entry``) is described with its age at ``as_of`` (the run's start;
    default today); a price without a source (runs from before sources) says its source is unknown."""
    cost = _section(settings, "cost")
    value = cost.get("node_price_per_hour")
    instance = cost.get("instance_type") if isinstance(cost.get("instance_type"), str) else ""
    zero = value == 0 and not isinstance(value, bool)  # 0 is the documented "no price"; false is no number
    if value is None or zero:
        return NodePrice(None, str(cost.get("price_source", "")) if zero else "")
    problem = prices.price_problem(value, instance)
    if problem:  # refused, and said: never a cost from it
        allowed = prices.price_allowed(instance)
        return NodePrice(None, f"no price: the run's cost.node_price_per_hour {value!r} {problem}; allowed: {allowed}")
    entry = cost.get("price_entry")
    if isinstance(entry, dict) and entry.get("per_hour") == value:
        return NodePrice(float(value), prices.describe_entry(entry, as_of))
    source = cost.get("price_source")
    return NodePrice(float(value), source if isinstance(source, str) and source.strip() else UNKNOWN_SOURCE)


def recorded_servers_per_node(settings: Mapping[str, Any] | None) -> tuple[int, str]:
    """Servers per node from the run's settings: ``cost.servers_per_node``, else from the serving
    settings (logical cores per node // tensor parallel size), else 1; and how it was found."""
    settings = settings or {}
    cost, serving = _section(settings, "cost"), _section(settings, "serving")
    cores, tp = cost.get("logical_cores_per_node"), serving.get("tensor_parallel_size")
    recorded = cost.get("servers_per_node")
    refused = ""
    if recorded is not None:
        problem = prices.servers_problem(recorded, cores)
        if not problem:
            return recorded, str(cost.get("servers_per_node_source", "the run's settings"))
        refused = f"the run's cost.servers_per_node {recorded!r} {problem} (allowed: {prices.servers_allowed(cores)}), refused; "
    if isinstance(cores, int) and isinstance(tp, int) and not isinstance(cores, bool) and not isinstance(tp, bool):
        try:
            return servers_per_node(cores, tp), f"{refused}{cores} logical cores per node // TP {tp}"
        except ValueError:
            pass
    return 1, f"{refused}not recorded in the run: taken as 1 server per node"


def servers_by_tp(settings: Mapping[str, Any] | None, tps: Iterable[int]) -> dict[int, int]:
    """Servers per node of a TP variant (sweep.tensor_parallel_sizes) from a run's settings: the
    recorded logical cores per node // its TP (charged by device share, as the services); ValueError
    naming the TP when the run recorded no core count or the TP does not fit a node."""
    cores = _section(settings, "cost").get("logical_cores_per_node")
    if not isinstance(cores, int) or isinstance(cores, bool):
        raise ValueError(f"points at TP {', '.join(map(str, sorted(tps)))}: their run recorded no cost.logical_cores_per_node")
    return {tp: servers_per_node(cores, tp) for tp in tps}


# --- with intervals ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Throughput:
    """One server's figures in one group (a test case or prompt class) at one load level."""

    variant: str
    level: str  # the load level's label (c4, r2p5)
    requests: int
    output_tokens: int
    busy_s: float
    servers_per_node: int
    per_server: stats.Interval  # output tokens per second per server while busy
    per_node: stats.Interval  # x servers per node
    cost_per_million: stats.Interval  # USD; point None without a price
    goodput_per_node: stats.Interval | None  # None without an SLO
    goodput_cost_per_million: stats.Interval | None

    def to_dict(self) -> dict[str, Any]:
        return stats.json_safe(asdict(self))


@dataclass(frozen=True)
class Saving:
    """The speculative service's cost per million tokens against the baseline's, at one level."""

    variant: str
    level: str
    dollars: stats.Interval  # baseline - speculative, USD per million output tokens (> 0: cheaper)
    percent: stats.Interval  # the same as a share of the baseline's cost, in %
    goodput_dollars: stats.Interval | None = None
    goodput_percent: stats.Interval | None = None


def _rate(good_only: bool, scale: float) -> Any:
    def estimate(items: Sequence[Share]) -> float | None:
        value = tokens_per_second(items, good_only)
        return None if value is None else value * scale

    return estimate


def _cost_of(interval: stats.Interval, price: NodePrice) -> stats.Interval:
    """Cost is K / throughput, decreasing: the percentile interval maps endpoint to endpoint, reversed."""
    if not price.known or interval.point is None:
        return stats.Interval(None, confidence=interval.confidence)
    low = cost_per_million_tokens(price.per_hour, interval.high) if interval.known else None
    high = cost_per_million_tokens(price.per_hour, interval.low) if interval.known else None
    known = low is not None and high is not None
    return stats.Interval(
        cost_per_million_tokens(price.per_hour, interval.point),
        low if known else None,
        high if known else None,
        interval.confidence,
        interval.resamples,
    )


def throughput(
    variant: str,
    level: str,
    items: Sequence[Share],
    servers: int,
    price: NodePrice,
    *,
    slo: bool = False,
    seed: int = 0,
    resamples: int = 2000,
    confidence: float = 0.95,
) -> Throughput:
    options = {"seed": seed, "resamples": resamples, "confidence": confidence}
    per_server = stats.bootstrap_ci((list(items),), _rate(False, 1.0), **options) if items else stats.Interval(None)
    per_node = _scaled(per_server, servers)
    good = stats.bootstrap_ci((list(items),), _rate(True, float(servers)), **options) if items and slo else None
    return Throughput(
        variant=variant,
        level=level,
        requests=len(items),
        output_tokens=sum(s.tokens for s in items),
        busy_s=math.fsum(s.busy_s for s in items),
        servers_per_node=servers,
        per_server=per_server,
        per_node=per_node,
        cost_per_million=_cost_of(per_node, price),
        goodput_per_node=good,
        goodput_cost_per_million=_cost_of(good, price) if good is not None else None,
    )


def _scaled(interval: stats.Interval, factor: float) -> stats.Interval:
    def times(value: float | None) -> float | None:
        return None if value is None else value * factor

    return stats.Interval(times(interval.point), times(interval.low), times(interval.high), interval.confidence, interval.resamples)


def saving(
    variant: str,
    level: str,
    baseline: Sequence[Share],
    speculative: Sequence[Share],
    baseline_servers: int,
    speculative_servers: int,
    price: NodePrice,
    *,
    slo: bool = False,
    seed: int = 0,
    resamples: int = 2000,
    confidence: float = 0.95,
) -> Saving | None:
    """None without a price or without both services' requests."""
    if not price.known or not baseline or not speculative:
        return None
    options = {"seed": seed, "resamples": resamples, "confidence": confidence}

    def estimator(good_only: bool, percent: bool) -> Any:
        def estimate(base: Sequence[Share], spec: Sequence[Share]) -> float | None:
            b = cost_per_million_tokens(price.per_hour, _times(tokens_per_second(base, good_only), baseline_servers))
            s = cost_per_million_tokens(price.per_hour, _times(tokens_per_second(spec, good_only), speculative_servers))
            if b is None or s is None:
                return None
            return (b - s) / b * 100.0 if percent else b - s

        return estimate

    groups = (list(baseline), list(speculative))
    dollars, percent = (stats.bootstrap_ci(groups, estimator(False, p), **options) for p in (False, True))
    if not slo:
        return Saving(variant, level, dollars, percent)
    good_dollars, good_percent = (stats.bootstrap_ci(groups, estimator(True, p), **options) for p in (False, True))
    return Saving(variant, level, dollars, percent, good_dollars, good_percent)


def _times(value: float | None, factor: int) -> float | None:
    return None if value is None else value * factor


def describe_cost(interval: stats.Interval | None, price: NodePrice) -> str:
    """``$4.12 (3.98-4.30)``; ``not computed (no price)``; ``n/a`` when nothing was measured."""
    if not price.known:
        return NO_PRICE
    if interval is None or interval.point is None:
        return "n/a"
    text = f"${interval.point:.2f}"
    if interval.known:
        text += f" ({interval.low:.2f}-{interval.high:.2f})"
    return text


# Every table's column for describe_saving (report, dashboard, publish): the sign is FIGURE_DEFINITIONS'.
SAVING_HEADER = "Saving vs baseline (baseline - speculative; + is cheaper)"


def describe_saving(saving_: Saving | None, price: NodePrice, goodput: bool = False) -> str:
    """The saving, baseline - speculative as run.json defines it (positive: the speculative service
    is cheaper), in dollars per million tokens and % of the baseline's, with both CIs:
    ``+$2.10 (+51%; 95% CI +$2.00 to +$2.20, +49% to +53%)``."""
    if not price.known:
        return NO_PRICE
    if saving_ is None:
        return "n/a"
    dollars, percent = (saving_.goodput_dollars, saving_.goodput_percent) if goodput else (saving_.dollars, saving_.percent)
    if dollars is None or percent is None or dollars.point is None or percent.point is None:
        return "n/a"
    text = f"{signed_amount(dollars.point, '$')} ({signed_amount(percent.point, '%')}"
    cis = [f"{signed_amount(i.low, unit)} to {signed_amount(i.high, unit)}" for i, unit in ((dollars, "$"), (percent, "%")) if i.known]
    if cis:
        text += f"; {percent.confidence if percent.known else dollars.confidence:.0%} CI " + ", ".join(cis)
    return text + ")"


def signed_amount(value: float | None, unit: str) -> str:
    """``+$2.10``, ``-$0.00041``, ``+0.21%``, ``0%``: signed, with enough decimals that a value that is
    not zero never prints as zero (two significant digits below 1; cents and whole percent above)."""
    if value is None:
        return "n/a"
    decimals = 2 if unit == "$" else 0
    if value != 0 and abs(value) < 1:
        decimals = min(8, max(decimals, 1 - math.floor(math.log10(abs(value)))))
    sign = "+" if value > 0 else "-" if value < 0 else ""
    number = f"{abs(value):.{decimals}f}"
    return f"{sign}${number}" if unit == "$" else f"{sign}{number}{unit}"


def level_label(record: RequestRecord, default: str) -> str:
    return record.load_level or default


def group_levels(records: Iterable[RequestRecord], default: str) -> list[str]:
    return list(dict.fromkeys(level_label(r, default) for r in records))
