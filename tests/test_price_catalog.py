"""The price catalog (issue 34): every entry has a source and the date it was seen, and a deployment
gets the entry for its own instance type, region and capacity mode, or "no price for ...", never
another region's or mode's price without saying so; the report says which entry and how old it is."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from datetime import date

import pytest

from config import load_config
from config.catalog import CAPACITY_MODES, TRAINIUM_INSTANCES
from config.cost import cost_table, node_price, price_choice
from config.prices import CATALOG, catalog_entry
from config.validate import REGION
from specbench.analysis import cost, prices

SEEN = re.compile(r"^\d{4}-(0[1-9]|1[0-2])(-(0[1-9]|[12]\d|3[01]))?\Z", re.ASCII)
RESERVATION = {"neuron_nodes.capacity_reservation_id": "cr-0123456789abcdef0"}


def settings(region: str, mode: str, instance: str = "trn2.48xlarge") -> dict:
    return {"env.region": region, "neuron_nodes.capacity_mode": mode, "neuron_nodes.instance_type": instance} | (
        RESERVATION if mode != "on-demand" else {}
    )


@pytest.mark.parametrize("entry", CATALOG, ids=lambda e: f"{e.instance_type}-{e.region}-{e.capacity_mode}")
def test_every_entry_has_a_source_a_date_and_a_plausible_price(entry):
    assert entry.source.strip() and "third-party" in entry.source and not entry.verified  # all unverified (REFERENCE.md 7)
    assert SEEN.match(entry.seen), entry.seen
    assert date.fromisoformat(entry.seen if len(entry.seen) == 10 else entry.seen + "-01") <= date.today()
    assert entry.capacity_mode in CAPACITY_MODES and REGION.match(entry.region)
    assert entry.instance_type in prices.CHIPS
    assert prices.price_problem(entry.per_hour, entry.instance_type) == "" and entry.per_hour > 0
    described = entry.describe("2027-01-15")
    assert f"{entry.instance_type} in {entry.region} ({entry.capacity_mode})" in described
    assert entry.source in described and f"seen {entry.seen}" in described and "unverified" in described
    assert "old on 2027-01-15" in described


def test_the_catalog_has_one_entry_per_instance_region_and_mode():
    keys = [(e.instance_type, e.region, e.capacity_mode) for e in CATALOG]
    assert len(keys) == len(set(keys))
    for e in CATALOG:
        assert catalog_entry(e.instance_type, e.region, e.capacity_mode) is e


def test_the_chip_counts_of_the_bounds_agree_with_the_instance_shapes():
    for name, shape in TRAINIUM_INSTANCES.items():
        assert prices.CHIPS[name] == shape.neuron_devices, name


def test_the_figures_of_the_reference():
    """REFERENCE.md section 7: the values as seen."""
    assert catalog_entry("trn2.48xlarge", "ap-south-2", "capacity-block").per_hour == 35.76
    assert catalog_entry("trn2.48xlarge", "us-east-2", "on-demand").per_hour == 14.56
    assert catalog_entry("trn2.3xlarge", "ap-southeast-4", "on-demand").per_hour == 2.235
    assert catalog_entry("trn2.48xlarge", "ap-south-2", "capacity-block").seen == "2026-10"


# --- a deployment's default -------------------------------------------------------------------------


def test_the_default_deployment_gets_its_own_regions_on_demand_entry():
    config = load_config({}, {})
    assert (config.env.region, config.neuron_nodes.capacity_mode) == ("us-east-2", "on-demand")
    chosen = price_choice(config)
    assert chosen.entry is catalog_entry("trn2.48xlarge", "us-east-2", "on-demand")
    assert chosen.per_hour == 14.56 and "us-east-2 (on-demand)" in chosen.source and "seen 2026-12" in chosen.source


def test_a_capacity_block_in_us_east_2_is_not_priced_from_ap_south_2():
    """Before: every trn2.48xlarge got the ap-south-2 Capacity Block offer, whatever its region."""
    config = load_config(settings("us-east-2", "capacity-block"), {})
    assert node_price(config) == (None, prices.no_price_text("trn2.48xlarge", "us-east-2", "capacity-block"))
    assert node_price(config)[1].startswith("no price for trn2.48xlarge in us-east-2 (capacity-block): set yours")
    assert node_price(load_config(settings("ap-south-2", "capacity-block"), {}))[0] == 35.76


def test_the_ap_south_2_on_demand_deployment_does_not_get_the_capacity_block_price():
    assert node_price(load_config(settings("ap-south-2", "on-demand"), {}))[0] is None
    assert node_price(load_config(settings("ap-south-2", "reservation"), {}))[0] is None


@pytest.mark.parametrize("instance", sorted(TRAINIUM_INSTANCES))
@pytest.mark.parametrize("region", sorted({e.region for e in CATALOG} | {"eu-west-1", "us-east-1"}))
@pytest.mark.parametrize("mode", CAPACITY_MODES)
def test_a_deployment_never_gets_another_regions_or_modes_price_silently(instance, region, mode):
    base = load_config({}, {})
    config = replace(
        base,
        env=replace(base.env, region=region),
        neuron_nodes=replace(base.neuron_nodes, instance_type=instance, capacity_mode=mode),
    )
    chosen = price_choice(config)
    if chosen.per_hour is None:
        assert chosen.entry is None and chosen.source.startswith(f"no price for {instance} in {region} ({mode})")
        assert all((e.instance_type, e.region, e.capacity_mode) != (instance, region, mode) for e in CATALOG)
    else:
        assert (chosen.entry.instance_type, chosen.entry.region, chosen.entry.capacity_mode) == (instance, region, mode)
        assert chosen.per_hour == chosen.entry.per_hour and f"{instance} in {region} ({mode})" in chosen.source
    # The user's own price is theirs whatever the catalog holds, and says so.
    own = replace(config, results=replace(config.results, node_price_per_hour=40.0))
    assert node_price(own) == (40.0, "setting results.node_price_per_hour")


def test_the_cost_table_prices_the_trainium_line_from_its_entry_or_says_none():
    table = cost_table(load_config({}, {}))
    line = next(row for row in table.splitlines() if "trn2.48xlarge" in row)
    assert "| 14.560 |" in line and "us-east-2 (on-demand)" in line and "2026-12" in line
    assert "no on-demand list price published" not in table and "| **total** | **15.22** |" in table
    missing = cost_table(load_config(settings("eu-west-1", "capacity-block"), {}))
    line = next(row for row in missing.splitlines() if "trn2.48xlarge" in row)
    assert "| - |" in line and "no price for trn2.48xlarge in eu-west-1 (capacity-block)" in line
    assert "**total**" not in missing.replace("**total without Trainium**", "")


# --- what a run records, and what its report says --------------------------------------------------


def test_the_settings_snapshot_records_the_entry_and_the_report_gives_its_age():
    from charts.spec import benchmark_spec, serving_plan

    config = load_config({}, {})
    snapshot = json.loads(benchmark_spec(config, serving_plan(config, "bucket")).settings_json)
    recorded = snapshot["cost"]
    assert (
        recorded["node_price_per_hour"] == 14.56
        and recorded["price_entry"] == catalog_entry("trn2.48xlarge", "us-east-2", "on-demand").to_dict()
    )
    price = cost.recorded_price(snapshot, "2027-03-02T10:00:00Z")
    assert price.per_hour == 14.56
    assert price.describe() == (
        "$14.56 per node-hour (catalog entry trn2.48xlarge in us-east-2 (on-demand): one third-party on-demand price listing, "
        "seen 2026-12, unverified, 3 months old on 2027-03-02)"
    )


def test_a_run_without_a_catalog_entry_reports_which_price_is_missing():
    from specbench.outputs.report import cost_settings

    config = load_config(settings("eu-west-1", "capacity-block"), {})
    price, source = node_price(config)
    recorded = cost.recorded_price({"cost": {"node_price_per_hour": price or 0, "price_source": source}})
    assert not recorded.known
    assert recorded.describe().startswith("no price for trn2.48xlarge in eu-west-1 (capacity-block): set yours")

    class Summary:  # what cost_settings reads
        slo, servers_per_node, servers_per_node_source = {}, 2, "given"

    Summary.price = recorded
    assert cost_settings(Summary)[0].startswith("Price: no price for trn2.48xlarge in eu-west-1 (capacity-block)")


def test_a_flag_price_replaces_the_entry():
    from specbench.commands import common

    snapshot = {"cost": {"node_price_per_hour": 14.56, "price_entry": CATALOG[1].to_dict(), "instance_type": "trn2.48xlarge"}}
    given = common.with_price(snapshot, 30.0, "specbench run --node-price-per-hour")
    assert "price_entry" not in given["cost"]
    assert cost.recorded_price(given) == cost.NodePrice(30.0, "specbench run --node-price-per-hour")


@pytest.mark.parametrize(
    ("seen", "as_of", "text"),
    [
        ("2026-10", "2026-10-31", "less than a month old on 2026-10-31"),
        ("2026-10", "2026-12-01T00:00:00Z", "2 months old on 2026-12-01"),
        ("2026-05", "2027-06-01", "13 months old on 2027-06-01"),
        ("2026-05-20", "2026-06-19", "less than a month old on 2026-06-19"),
        ("2026-05-20", "2026-06-20", "1 month old on 2026-06-20"),
        ("2026-12", "2026-11-30", "seen after 2026-11-30"),
        ("?", "2026-11-30", "age unknown"),
    ],
)
def test_the_age_of_an_entry(seen, as_of, text):
    assert prices.age_text(seen, as_of) == text


def test_an_entry_a_damaged_run_recorded_is_still_described():
    described = prices.describe_entry({"instance_type": 3, "verified": "yes"}, "2026-12-01")
    assert described == "catalog entry ? in ? (?): ?, seen ?, unverified, age unknown"


def test_the_plan_of_a_deployment_without_an_entry_prices_nothing(capsys):
    from specbench import cli

    sweep = ["-c", "sweep.variants=q17-k5:Qwen/Qwen3-1.7B:5", "-c", "neuron_nodes.desired_size=2", "-c", "neuron_nodes.max_size=2"]
    assert cli.main(["plan", *sweep, "-c", "env.region=eu-west-1"]) == 0
    estimate = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("estimate:"))
    assert estimate.endswith("Neuron node-hours, no node price (set results.node_price_per_hour)")
