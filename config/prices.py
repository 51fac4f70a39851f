"""The price catalog: node prices seen, one entry per instance type, region and capacity mode, each
with where it was seen and when.

A deployment's default node price is the entry for its own instance type, region and capacity mode
(``neuron_nodes.capacity_mode``), never another region's or mode's: Capacity Block prices vary by
region, date and length, and on-demand prices by region (../shared/REFERENCE.md section 7). With no
matching entry the price is "no price for <instance> in <region> (<mode>)" and the cost is not
computed until the user sets one (``results.node_price_per_hour``).

Every figure here is third-party and unverified unless ``verified`` says otherwise; nothing is
fetched. Pure data and small pure functions (tests/test_price_catalog.py).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from specbench.analysis.prices import describe_entry, no_price_text


@dataclass(frozen=True)
class PriceEntry:
    instance_type: str
    region: str
    capacity_mode: str  # one of config.catalog.CAPACITY_MODES
    per_hour: float  # USD per node-hour
    source: str  # where the figure was seen
    seen: str  # when: YYYY-MM or YYYY-MM-DD
    verified: bool = False  # checked against AWS's own price list

    def to_dict(self) -> dict[str, Any]:
        """What a run records (run.json ``cost.price_entry``), so its report can say how old it is."""
        return asdict(self)

    def describe(self, as_of: str | None = "") -> str:
        return describe_entry(self.to_dict(), as_of)


# The figures collected in ../shared/REFERENCE.md section 7 ("Instances and prices"), all third-party.
CATALOG: tuple[PriceEntry, ...] = (
    # The figure the project recorded first: one 24-hour Capacity Block offer; 16 x the trn2.3xlarge
    # on-demand $2.235 below, i.e. the same chip-hour.
    PriceEntry("trn2.48xlarge", "ap-south-2", "capacity-block", 35.76, "a 24-hour Capacity Block offer, third-party report", "2026-10"),
    # One listing only, and $0.91 per chip-hour where the other two give $2.235: treat with care (the
    # project found no on-demand trn2.48xlarge product in the Pricing API when it recorded the offer above).
    # Seen: the month REFERENCE.md's second round of facts was checked; the listing gives no date.
    PriceEntry("trn2.48xlarge", "us-east-2", "on-demand", 14.56, "one third-party on-demand price listing", "2026-12"),
    PriceEntry("trn2.3xlarge", "ap-southeast-4", "on-demand", 2.235, "third-party on-demand price listings", "2026-05"),
)


def catalog_entry(instance_type: str, region: str, capacity_mode: str) -> PriceEntry | None:
    """The entry for exactly this instance type, region and capacity mode, or None."""
    matches = [e for e in CATALOG if (e.instance_type, e.region, e.capacity_mode) == (instance_type, region, capacity_mode)]
    return matches[0] if matches else None


def missing_price(instance_type: str, region: str, capacity_mode: str) -> str:
    """The line a deployment without a catalog entry gets in place of a price."""
    return no_price_text(instance_type, region, capacity_mode)
