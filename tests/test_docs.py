"""The docs tell the truth: the README's first commands and cost table, docs/configuration.md's
configuration table, the figures of docs/performance.md and docs/serving.md, and CI's command."""

from __future__ import annotations

import re

import pytest

from config import all_keys, capacity, catalog, docs, load_config
from config.cost import BEGIN as COST_BEGIN
from config.cost import END as COST_END
from config.cost import cost_table, hourly_cost
from config.docs import BEGIN, END, config_table, refresh
from conftest import ROOT

README = (ROOT / "README.md").read_text()
CONFIGURATION = (ROOT / "docs" / "configuration.md").read_text()
PERFORMANCE = (ROOT / "docs" / "performance.md").read_text()
SERVING = (ROOT / "docs" / "serving.md").read_text()


def test_readme_opens_with_the_two_fresh_machine_commands():
    first_block = re.search(r"```sh\n(.*?)```", README, re.S)
    assert first_block and first_block.start() < 200, "the two commands must come first"
    commands = [line.split("#")[0].strip() for line in first_block.group(1).strip().splitlines()]
    assert commands == ["make synth", "make test"]


def test_ci_runs_the_readme_test_command():
    script = (ROOT / ".ci" / "run").read_text()
    assert [line for line in script.splitlines() if line and not line.startswith(("#", "set ", "cd "))] == ["make test"]


def test_configuration_table_is_generated_from_the_model():
    embedded = CONFIGURATION.split(BEGIN, 1)[1].split(END, 1)[0].strip()
    assert embedded == config_table(), "docs/configuration.md's table is stale: run `python -m config.docs --write`"


def test_cost_table_is_generated_from_the_model():
    embedded = README.split(COST_BEGIN, 1)[1].split(COST_END, 1)[0].strip()
    assert embedded == cost_table(load_config({}, {})), "README cost table is stale: run `python -m config.docs --write`"


def test_cost_follows_the_configuration():
    default = {line.item: line.per_hour for line in hourly_cost(load_config({}, {}))}
    bigger = {line.item: line.per_hour for line in hourly_cost(load_config({"system_nodes.desired_size": 3}, {}))}
    assert bigger["3 x m7i.xlarge system nodes"] == pytest.approx(default["2 x m7i.xlarge system nodes"] * 1.5)
    assert (
        bigger["gp3 root volumes (size, IOPS and throughput above baseline)"]
        > default["gp3 root volumes (size, IOPS and throughput above baseline)"]
    )


def test_every_setting_is_documented():
    for key in all_keys():
        assert f"`{key}`" in CONFIGURATION, key


def test_bench_figures_are_present():
    assert "BENCH_TABLE" not in PERFORMANCE
    assert re.search(r"\| full platform, python app.py \| \d+\.\d \| \d+ \|", PERFORMANCE)


def test_node_fit_table_is_computed_from_the_capacity_model():
    config = load_config({}, {})
    instance = catalog.TRAINIUM_INSTANCES[config.neuron_nodes.instance_type]
    s, lnc = config.serving, config.neuron_nodes.logical_nc_config
    service = capacity.service_request(instance, lnc, s.tensor_parallel_size, s.cpu_per_service, s.memory_gib_per_service)
    assert capacity.fit_table(instance, service, 2) in SERVING


def test_write_targets_hold_the_generated_blocks():
    """`python -m config.docs --write` writes the configuration table into docs/configuration.md
    and the cost table into README.md, and nowhere else."""
    assert docs.TARGETS == ("docs/configuration.md", "README.md")
    assert BEGIN in CONFIGURATION and COST_BEGIN not in CONFIGURATION
    assert COST_BEGIN in README and BEGIN not in README


def test_refresh_replaces_only_the_blocks_a_page_holds():
    page = f"intro\n{BEGIN}\nstale\n{END}\noutro\n"
    assert refresh(page) == f"intro\n{BEGIN}\n{config_table()}\n{END}\noutro\n"
    cost_page = f"{COST_BEGIN}\nstale\n{COST_END}\n"
    assert refresh(cost_page) == f"{COST_BEGIN}\n{cost_table(load_config({}, {}))}\n{COST_END}\n"
    with pytest.raises(ValueError, match="no generated block"):
        refresh("no markers here\n")


def test_write_refuses_a_file_without_markers_in_one_line(tmp_path):
    import subprocess
    import sys

    plain = tmp_path / "plain.md"
    plain.write_text("nothing generated\n")
    done = subprocess.run([sys.executable, "-m", "config.docs", "--write", str(plain)], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 1
    assert done.stderr == f"config.docs --write: {plain}: no generated block (config-table or cost-table markers) in the text\n"
    assert plain.read_text() == "nothing generated\n"


def test_an_unknown_key_points_at_the_page_that_lists_every_key():
    from config import ConfigError

    with pytest.raises(ConfigError) as error:
        load_config({"zzzz.qqqq": "1"}, {})
    assert str(error.value) == (
        "config error: zzzz.qqqq='1': is not a setting (there is no section 'zzzz'); "
        "allowed: a key from the configuration table, docs/configuration.md"
    )
    assert (ROOT / "docs" / "configuration.md").is_file()


def test_every_image_the_docs_name_exists_and_is_a_small_png():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    named = [(page, target) for page in pages for target in re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", page.read_text(encoding="utf-8"))]
    assert any(target.endswith("report-first-screen.png") for _, target in named)
    for page, target in named:
        path = (page.parent / target).resolve()
        assert path.is_file(), f"{page.name} names {target}, which does not exist"
        data = path.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) < 400_000, f"{target}: a small PNG"
