"""Cost inputs have bounds and a source (issue 33): a node price or servers-per-node that is not a
plain finite number, negative, zero where it divides, or implausible for the instance type is refused
where it enters (the setting, a run's settings, run.json, the flags) with one line naming the field
and the allowed range, and never published; no value of the price setting doubles as "not set";
class weights that overflow or are not plain numbers are refused at synth."""

from __future__ import annotations

import json
import math

import pytest

from config import ConfigError, load_config
from config.cost import node_price
from specbench import cli
from specbench.analysis import cost, prices
from specbench.analysis.aggregate import summarize_run
from specbench.commands import common
from specbench.outputs.publish import throughput_datums
from specbench.prompts.suite import SuiteError, parse_suite
from specbench.results import runfiles
from specbench.results.store import LocalStore, RunStore
from tests import runs

KEY = "results.node_price_per_hour"
TRN2_ALLOWED = (
    "0 (no price: cost not computed) or 3.2 to 320 USD per node-hour (trn2.48xlarge: 16 chip(s) x $0.20 to $20 per Trainium chip-hour)"
)


# --- the setting -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    [
        -1,  # the old "not set" sentinel: silently became the recorded price
        "-1",
        -1.0,
        "-0.01",
        "nan",
        math.nan,  # cdk.json's NaN, as json.loads reads it
        "inf",
        -math.inf,
        "abc",
        "35$",
        "３５",  # fullwidth digits
        "1_0",
        True,
        None,  # cdk.json's null is not "not set": leave the key out for that
        [35],
        10**400,
        3576,  # cents
        2.235,  # per chip, on a 16-chip node
        26104.8,  # per month
        "1e9",
    ],
)
def test_a_bad_price_setting_is_one_line_naming_the_field_and_the_range(bad):
    with pytest.raises(ConfigError) as error:
        load_config({KEY: bad}, {})
    (problem,) = error.value.problems
    line = str(problem)
    assert line.startswith(f"{KEY}=") and "\n" not in line
    assert "allowed: 0 (no price: cost not computed) or " in line and "USD per node-hour" in line


def test_the_plausible_range_is_the_instance_types():
    assert prices.price_allowed("trn2.48xlarge") == TRN2_ALLOWED
    with pytest.raises(
        ConfigError, match=r"is outside the plausible range .*allowed: 0 .* or 3.2 to 320 USD per node-hour \(trn2.48xlarge"
    ):
        load_config({KEY: "3.1"}, {})
    assert node_price(load_config({KEY: "3.2"}, {})) == (3.2, "setting results.node_price_per_hour")
    assert node_price(load_config({KEY: "320"}, {}))[0] == 320.0
    # A one-chip type's range is a sixteenth of it.
    assert prices.plausible_range("trn1.2xlarge") == (0.2, 20.0) and prices.plausible_range("trn2.48xlarge") == (3.2, 320.0)
    with pytest.raises(ConfigError, match=r"allowed: 0 .* or 0.2 to 20 USD per node-hour \(trn1.2xlarge: 1 chip"):
        load_config({"neuron_nodes.instance_type": "trn1.2xlarge", KEY: "21.5"}, {})


def test_zero_is_the_documented_no_price_and_left_out_is_the_catalogs():
    assert node_price(load_config({KEY: 0}, {})) == (None, "no price (results.node_price_per_hour=0): cost not computed")
    assert node_price(load_config({KEY: "0"}, {}))[0] is None
    left_out = load_config({}, {})
    assert left_out.results.node_price_per_hour is None and node_price(left_out)[0] == 14.56


# --- the flags ---------------------------------------------------------------------------------------


COMMANDS = (
    ["report", "some-run"],
    ["sweep-report", "--sweep-id", "x"],
    ["run"],
    ["predict"],
    ["sweep", "next", "--sweep-id", "x"],
)


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0] + (f"-{c[1]}" if c[0] == "sweep" else ""))
@pytest.mark.parametrize("bad", ["-1", "nan", "inf", "abc", "", "1e9", "0.1", "５"])
def test_a_bad_price_flag_exits_2_in_one_line(capsys, command, bad):
    with pytest.raises(SystemExit) as exit_:
        cli.main([*command, "--node-price-per-hour", bad])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "--node-price-per-hour" in err and err.count("\n") == 1
    assert "0 (no price: cost not computed) or 0.2 to 320 USD per node-hour" in err


@pytest.mark.parametrize("command", [["report", "some-run"], ["sweep-report", "--sweep-id", "x"]], ids=lambda c: c[0])
@pytest.mark.parametrize("bad", ["0", "-1", "2.5", "abc", "129", "1e3"])
def test_a_bad_servers_per_node_flag_exits_2_in_one_line(capsys, command, bad):
    with pytest.raises(SystemExit) as exit_:
        cli.main([*command, "--servers-per-node", bad])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "--servers-per-node" in err and err.count("\n") == 1


def stored_run(tmp_path, cost_block: dict | None) -> RunStore:
    """A one-case run stored under tmp_path/results/run-1 with ``cost_block`` as its settings' cost."""
    store = RunStore(LocalStore(tmp_path / "results"), "run-1")
    run = runs.write_run(store, cases=runs.CASES[:1], requests=4)
    if cost_block is not None:
        run["plan"]["deployment"]["cost"] = cost_block
        store.write("run.json", json.dumps(run))
    return store


def test_a_report_flag_price_implausible_for_the_runs_instance_type_exits_2(tmp_path, capsys):
    stored_run(tmp_path, {"node_price_per_hour": 35.76, "price_source": "s", "instance_type": "trn2.48xlarge"})
    location = str(tmp_path / "results" / "run-1")
    with pytest.raises(SystemExit) as exit_:
        cli.main(["report", location, "--no-charts", "--out", str(tmp_path / "out"), "--node-price-per-hour", "2.2"])
    err = capsys.readouterr().err
    assert (
        exit_.value.code == 2
        and err
        == f"specbench: report --node-price-per-hour 2.2: is outside the plausible range (a price per month, in cents, or per chip?); allowed: {TRN2_ALLOWED}\n"
    )
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("cost_block", "message"),
    [
        ({"node_price_per_hour": "36"}, "--settings: cost.node_price_per_hour '36' is not a number"),
        ({"node_price_per_hour": -1}, "--settings: cost.node_price_per_hour -1 is negative"),
        ({"node_price_per_hour": 5000, "instance_type": "trn2.48xlarge"}, "--settings: cost.node_price_per_hour 5000 is outside"),
        ({"servers_per_node": 0}, "--settings: cost.servers_per_node 0 is less than 1"),
        ({"servers_per_node": "2"}, "--settings: cost.servers_per_node '2' is not a whole number"),
        ({"servers_per_node": 3, "logical_cores_per_node": 2}, "--settings: cost.servers_per_node 3 is more servers than"),
    ],
)
def test_a_run_refuses_bad_cost_inputs_in_its_settings_and_stores_nothing(tmp_path, capsys, cost_block, message):
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"cost": cost_block}))
    results = tmp_path / "results"
    code = cli.main(["run", "--endpoint", "a=http://127.0.0.1:9", "--results", str(results), "--no-publish", "--settings", str(settings)])
    err = capsys.readouterr().err
    assert code == cli.EXIT_USAGE and err.startswith(f"specbench: {message}") and err.count("\n") == 1 and "allowed: " in err
    assert not results.exists() or list(results.iterdir()) == []


def test_a_run_flag_price_implausible_for_the_settings_instance_type_is_refused(tmp_path, capsys):
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"cost": {"instance_type": "trn2.48xlarge", "node_price_per_hour": 14.56}}))
    argv = ["run", "--endpoint", "a=http://127.0.0.1:9", "--results", str(tmp_path / "r"), "--no-publish", "--settings", str(settings)]
    assert cli.main([*argv, "--node-price-per-hour", "2"]) == cli.EXIT_USAGE
    assert capsys.readouterr().err.startswith("specbench: specbench run --node-price-per-hour 2: is outside the plausible range")


# --- run.json as stored ------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [-1, "36", math.nan, math.inf, True, False, 5000, [36], 10**400, "0"])
def test_a_stored_bad_price_is_refused_said_and_never_published(tmp_path, bad):
    block = {"node_price_per_hour": bad, "price_source": "s", "instance_type": "trn2.48xlarge", "servers_per_node": 2}
    files = runfiles.load_run(stored_run(tmp_path, block))
    summary = summarize_run(files.run, files.records, files.acceptance, resamples=50)
    assert summary.price.per_hour is None
    assert summary.price.describe().startswith(f"no price: the run's cost.node_price_per_hour {bad!r} ")
    assert all(t.cost_per_million.point is None for g in summary.prompt_classes for v in g.variants.values() for t in v.throughput)
    # Not published: the cost metric is absent (throughput still is).
    assert {d["MetricName"] for d in throughput_datums(files.records, files.run)} == {"OutputTokensPerSecondPerNode"}


def test_a_run_from_before_price_sources_still_loads_and_says_the_source_is_unknown(tmp_path):
    files = runfiles.load_run(stored_run(tmp_path, {"node_price_per_hour": 35.76, "servers_per_node": 2}))
    summary = summarize_run(files.run, files.records, files.acceptance, resamples=50)
    assert summary.price == cost.NodePrice(35.76, "source unknown: the run recorded none")
    assert summary.price.describe() == "$35.76 per node-hour (source unknown: the run recorded none)"
    from specbench.outputs.report import cost_settings

    assert cost_settings(summary)[0].startswith("Price: $35.76 per node-hour (source unknown: the run recorded none).")


def test_a_run_with_the_catalog_entry_reports_it_with_its_age_at_the_run(tmp_path):
    entry = {
        "instance_type": "trn2.48xlarge",
        "region": "us-east-2",
        "capacity_mode": "on-demand",
        "per_hour": 14.56,
        "source": "one third-party on-demand price listing",
        "seen": "2026-09",
        "verified": False,
    }
    block = {"node_price_per_hour": 14.56, "price_source": "x", "price_entry": entry, "instance_type": "trn2.48xlarge"}
    files = runfiles.load_run(stored_run(tmp_path, block))
    summary = summarize_run(files.run, files.records, files.acceptance, resamples=50)
    assert summary.price.describe() == (
        "$14.56 per node-hour (catalog entry trn2.48xlarge in us-east-2 (on-demand): one third-party on-demand price listing, "
        "seen 2026-09, unverified, 2 months old on 2026-11-29)"  # runs.write_run starts 2026-11-29
    )
    # An entry that is not the price (edited by hand) is not claimed as its source.
    files.run["plan"]["deployment"]["cost"]["node_price_per_hour"] = 20.0
    assert cost.recorded_price(files.run["plan"]["deployment"]) == cost.NodePrice(20.0, "x")


@pytest.mark.parametrize(
    ("servers", "cores", "expected"),
    [
        ("2", 64, "the run's cost.servers_per_node '2' is not a whole number"),
        (0, 64, "the run's cost.servers_per_node 0 is less than 1"),
        (-2, 64, "the run's cost.servers_per_node -2 is less than 1"),
        (1000, 64, "the run's cost.servers_per_node 1000 is more servers than the node has logical cores"),
        (2.0, 64, "the run's cost.servers_per_node 2.0 is not a whole number"),
        (True, 64, "the run's cost.servers_per_node True is not a whole number"),
    ],
)
def test_a_stored_bad_servers_per_node_is_refused_and_said(servers, cores, expected):
    settings = {"cost": {"servers_per_node": servers, "logical_cores_per_node": cores}, "serving": {"tensor_parallel_size": 32}}
    count, source = cost.recorded_servers_per_node(settings)
    assert count == 2 and source.startswith(expected) and source.endswith("refused; 64 logical cores per node // TP 32")


def test_the_bounds_of_servers_per_node():
    assert prices.servers_problem(128) == "" and prices.servers_problem(129)
    assert prices.servers_problem(64, 64) == "" and prices.servers_problem(65, 64)
    assert prices.servers_allowed(64) == "a whole number from 1 to 64 (servers per node, at most one per logical core)"


# --- class weights -----------------------------------------------------------------------------------

SWEEP = {
    "neuron_nodes.desired_size": 2,
    "neuron_nodes.max_size": 2,
    "sweep.variants": "q17-k5:Qwen/Qwen3-1.7B:5",
    "sweep.strategy": "staged",
}


@pytest.mark.parametrize(
    ("weights", "problem"),
    [
        ("structured:1e308,open-ended:1e308", "the weight is above 1e+06 (weights are relative)"),  # their sum is inf
        ("structured:2e6", "the weight is above 1e+06"),
        ("structured:١", "the weight is not a plain number: expected a number (ASCII digits only)"),
        ("structured:1_0", "the weight is not a plain number: expected a number"),
        ("structured:٣.٥", "the weight is not a plain number"),
    ],
)
def test_class_weights_that_overflow_or_are_not_plain_numbers_are_refused_at_synth(weights, problem):
    with pytest.raises(ConfigError) as error:
        load_config({**SWEEP, "sweep.class_weights": weights}, {})
    lines = [str(p) for p in error.value.problems]
    assert len(lines) == 1 and lines[0].startswith("sweep.class_weights=") and problem in lines[0]
    assert lines[0].endswith("allowed: CLASS:WEIGHT items, each weight a plain number from 0 to 1e+06, e.g. code:3,qa:1")


def test_plain_class_weights_still_pass():
    config = load_config({**SWEEP, "sweep.class_weights": "structured:3,open-ended:0.5"}, {})
    assert config.sweep.class_weights == ("structured:3", "open-ended:0.5")


@pytest.mark.parametrize("weight", [10**400, 1e300, 2_000_000])
def test_a_suites_class_weights_that_overflow_are_refused(weight):
    suite = {
        "name": "mix",
        "class_weights": {"structured": weight},
        "test_cases": [{"name": "a", "prompt_class": "structured", "text": "1"}],
    }
    with pytest.raises(SuiteError) as error:
        parse_suite(suite)
    message = str(error.value)
    assert "class_weights.structured" in message and "must be a number >= 0 and at most 1e+06" in message and len(message) < 200


def test_the_dashboard_and_the_cli_report_say_which_entry_and_how_old(tmp_path, capsys):
    from specbench.outputs import dashboard

    entry = {"instance_type": "trn2.48xlarge", "region": "us-east-2", "capacity_mode": "on-demand", "per_hour": 14.56}
    entry |= {"source": "one third-party on-demand price listing", "seen": "2026-10", "verified": False}
    block = {"node_price_per_hour": 14.56, "price_source": "x", "price_entry": entry, "instance_type": "trn2.48xlarge"}
    files = runfiles.load_run(stored_run(tmp_path, {**block, "servers_per_node": 2}))
    summary = summarize_run(files.run, files.records, files.acceptance, resamples=50)
    note = dashboard.cost_markdown(summary, summary.prompt_classes[0].name)
    assert "catalog entry trn2.48xlarge in us-east-2 (on-demand)" in note and "seen 2026-10, unverified, 1 month old on 2026-11-29" in note
    location = str(tmp_path / "results" / "run-1")
    assert cli.main(["report", location, "--no-charts", "--out", str(tmp_path / "out"), "--resamples", "50"]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith("price: $14.56 per node-hour (catalog entry trn2.48xlarge in us-east-2 (on-demand): ")
    assert last.endswith("1 month old on 2026-11-29); 2 servers per node (the run's settings)")


@pytest.mark.parametrize("damaged", [[1], "x", 3, True])
def test_a_cost_section_that_is_not_an_object_is_no_price_and_no_recorded_servers(damaged):
    assert cost.recorded_price({"cost": damaged}) == cost.NodePrice(None, "")
    assert cost.recorded_servers_per_node({"cost": damaged, "serving": damaged}) == (
        1,
        "not recorded in the run: taken as 1 server per node",
    )
    with pytest.raises(ValueError, match=r"^--settings: cost is \w+, expected an object"):
        common.with_price({"cost": damaged}, None, "flag")


def test_a_flag_price_replaces_a_bad_price_in_the_settings():
    given = common.with_price({"cost": {"node_price_per_hour": -1, "instance_type": "trn2.48xlarge"}}, 20.0, "flag")
    assert cost.recorded_price(given) == cost.NodePrice(20.0, "flag")
