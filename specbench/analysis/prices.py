"""What a node price and a servers-per-node figure may be, and how a price's catalog entry reads.

One set of bounds for every place a cost input enters (the setting ``results.node_price_per_hour``
at synth, the ``--node-price-per-hour`` and ``--servers-per-node`` flags, a run's settings and its
run.json when read back), so a value refused in one is refused in all and never published.

Plausible node prices are per Trainium chip-hour, times the chips of the instance type: the prices
seen (config/prices.py) are $0.91 to $2.24 per chip-hour, so $0.20 to $20 leaves room for spot and
negotiated prices while a price per month (x730), in cents (x100) or per chip on a 16-chip node is
refused. 0 is the documented "no price" (cost not computed); it never means "not set".

Standard library only: the benchmark Job and the aggregation Lambda read runs with it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import date
from typing import Any

# Trainium chips (Neuron devices) per instance type: the EC2 instance pages, as config/catalog.py.
CHIPS = {"trn1.2xlarge": 1, "trn1.32xlarge": 16, "trn1n.32xlarge": 16, "trn2.3xlarge": 1, "trn2.48xlarge": 16, "trn2u.48xlarge": 16}
CHIP_HOUR_USD = (0.20, 20.0)
# At most one server per logical core: 16 chips x 8 physical cores at LNC=1 (trn2.48xlarge).
MAX_SERVERS_PER_NODE = 128
NO_PRICE_MEANING = "0 = no price: cost not computed"
_SEEN = re.compile(r"^(\d{4})-(\d{2})(?:-(\d{2}))?", re.ASCII)


def plausible_range(instance_type: str = "") -> tuple[float, float]:
    """USD per node-hour a price of this type may be; an unknown type gets the widest range."""
    chips = CHIPS.get(instance_type)
    low, high = CHIP_HOUR_USD
    if chips is None:
        return low * min(CHIPS.values()), high * max(CHIPS.values())
    return round(low * chips, 2), high * chips


def price_allowed(instance_type: str = "") -> str:
    """The allowed values of a node price, for an error line."""
    low, high = plausible_range(instance_type)
    per_chip = f"${CHIP_HOUR_USD[0]:.2f} to ${CHIP_HOUR_USD[1]:g} per Trainium chip-hour"
    what = f"{instance_type}: {CHIPS[instance_type]} chip(s) x {per_chip}" if instance_type in CHIPS else f"any Trainium type, {per_chip}"
    return f"0 (no price: cost not computed) or {low:g} to {high:g} USD per node-hour ({what})"


def price_problem(value: Any, instance_type: str = "") -> str:
    """Why ``value`` cannot be a node price of ``instance_type`` ("" when it can)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "is not a number"
    try:
        value = float(value)
    except OverflowError:  # an integer beyond any float
        return "is too large"
    if not math.isfinite(value):
        return "is not a finite number"
    if value < 0:
        return "is negative"
    low, high = plausible_range(instance_type)
    if value != 0 and not low <= value <= high:
        return "is outside the plausible range (a price per month, in cents, or per chip?)"
    return ""


def servers_problem(value: Any, logical_cores: Any = None) -> str:
    """Why ``value`` cannot be servers per node ("" when it can): a whole number from 1 (it
    divides) to the node's logical cores (``MAX_SERVERS_PER_NODE`` when not known)."""
    if isinstance(value, bool) or not isinstance(value, int):
        return "is not a whole number"
    if value < 1:
        return "is less than 1"
    if value > servers_limit(logical_cores):
        return "is more servers than the node has logical cores"
    return ""


def servers_limit(logical_cores: Any = None) -> int:
    known = isinstance(logical_cores, int) and not isinstance(logical_cores, bool) and 1 <= logical_cores <= MAX_SERVERS_PER_NODE
    return logical_cores if known else MAX_SERVERS_PER_NODE


def servers_allowed(logical_cores: Any = None) -> str:
    return f"a whole number from 1 to {servers_limit(logical_cores)} (servers per node, at most one per logical core)"


def no_price_text(instance_type: str, region: str, capacity_mode: str) -> str:
    return (
        f"no price for {instance_type} in {region} ({capacity_mode}): set yours with -c results.node_price_per_hour=... "
        "(or --node-price-per-hour)"
    )


# --- a catalog entry as a run recorded it --------------------------------------------------------


def months_between(seen: str, as_of: str) -> int | None:
    """Whole months from ``seen`` (YYYY-MM[-DD]) to ``as_of`` (an ISO date or time); None if unreadable."""
    a, b = _SEEN.match(seen or ""), _SEEN.match(as_of or "")
    if not a or not b:
        return None
    months = (int(b.group(1)) - int(a.group(1))) * 12 + int(b.group(2)) - int(a.group(2))
    if a.group(3) and b.group(3) and int(b.group(3)) < int(a.group(3)):
        months -= 1  # not yet a whole month
    return months


def age_text(seen: str, as_of: str = "") -> str:
    """How old an entry seen at ``seen`` is at ``as_of`` (default: today, UTC)."""
    when = as_of[:10] if as_of else date.today().isoformat()
    months = months_between(seen, when)
    if months is None:
        return "age unknown"
    if months < 0:
        return f"seen after {when}"
    if months == 0:
        return f"less than a month old on {when}"
    return f"{months} month{'s' if months != 1 else ''} old on {when}"


def describe_entry(entry: Mapping[str, Any], as_of: str | None = "") -> str:
    """One line: which catalog entry, its source, when it was seen and how old it is at ``as_of``
    (default today; None: no age, for the settings a synth records, which must not change by day)."""

    def text(name: str) -> str:
        value = entry.get(name)
        return value if isinstance(value, str) and value else "?"

    checked = "verified" if entry.get("verified") is True else "unverified"
    which = f"{text('instance_type')} in {text('region')} ({text('capacity_mode')})"
    line = f"catalog entry {which}: {text('source')}, seen {text('seen')}, {checked}"
    return line if as_of is None else f"{line}, {age_text(text('seen'), as_of)}"
