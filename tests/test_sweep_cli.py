"""``specbench run --sweep-id/--sweep-point`` (a sweep point's run.json) and ``specbench plan``."""

from __future__ import annotations

import json

import pytest

from specbench import cli
from specbench.emulator.server import EmulatorServer, default_profiles
from specbench.results.store import LocalStore, RunStore

POINT = {
    "point_id": "q17-k5-c4",
    "wave": 1,
    "variant": {"name": "q17-k5", "draft_model": "Qwen/Qwen3-1.7B", "k": 5, "method": "draft"},
    "load": {"kind": "concurrency", "value": 4},
}


def _run(url: str, results, run_id: str, *extra: str) -> int:
    return cli.main(
        ["run", "--endpoint", f"q17-k5={url}", "--test-case", "counting", "--output-tokens", "20", "--requests", "4"]
        + ["--results", str(results), "--run-id", run_id, "--no-publish", "--no-progress", "--ready-timeout", "5", *extra]
    )


def test_a_sweep_points_run_json_carries_its_sweep_object_and_only_it(tmp_path):
    profile = default_profiles(time_scale=0.1)["qwen-sd-vllm"]
    results = tmp_path / "sweeps" / "sweep-a"
    with EmulatorServer(profile) as server:
        assert _run(server.url, results, "q17-k5-c4", "--sweep-id", "sweep-a", "--sweep-point", json.dumps(POINT)) == 0
        assert _run(server.url, tmp_path, "plain") == 0
    run = json.loads(RunStore(LocalStore(results), "q17-k5-c4").read("run.json"))
    assert run["sweep"] == {"sweep_id": "sweep-a", **POINT}
    assert run["status"] == "completed" and run["counts"]["requests"] == 4
    assert "sweep" not in json.loads(RunStore(LocalStore(tmp_path), "plain").read("run.json"))


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--sweep-id", "sweep-a"], "specbench: --sweep-id and --sweep-point go together"),
        (["--sweep-point", "{}"], "specbench: --sweep-id and --sweep-point go together"),
        (["--sweep-id", "sweep-a", "--sweep-point", "{"], "specbench: --sweep-point: not JSON"),
    ],
)
def test_bad_sweep_flags_are_one_line_and_store_nothing(tmp_path, capsys, extra, message):
    code = cli.main(["run", "--endpoint", "a=http://127.0.0.1:9", "--results", str(tmp_path), "--no-publish", *extra])
    err = capsys.readouterr().err
    assert code == cli.EXIT_USAGE and err.startswith(message) and err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_plan_prints_the_configured_sweep(capsys):
    code = cli.main(
        ["plan", "-c", "sweep.variants=q17-k5:Qwen/Qwen3-1.7B:5", "-c", "neuron_nodes.desired_size=2", "-c", "neuron_nodes.max_size=2"]
        + ["-c", "results.node_price_per_hour=35.76"]  # a price of its own: the catalog's default is tests/test_price_catalog.py's
    )
    out = capsys.readouterr().out.splitlines()
    assert code == 0
    assert out[0] == "sweep: 1 variant(s) + baseline (first and last wave) x 2 load level(s) [c1, c4] = 6 points in 3 pods"
    assert out[-4] == "estimate: 2 wave(s), 3.2 h wall clock, 3.2 Neuron node-hours, $116 at $35.76/node-hour"
    # Both strategies beside each other (issue 27): one variant, so staged = its stage 1 = the grid.
    assert out[-3:-1] == ["strategy grid", "  grid:   3.2 node-hours ($116)"]
    assert out[-1].startswith("  staged: stage 1 3.2 node-hours ($116) [baseline, q17-k5 (k = 5), baseline again]")


def test_plan_without_a_sweep_or_with_a_bad_setting(capsys):
    assert cli.main(["plan"]) == 0
    assert capsys.readouterr().out.startswith("no sweep configured: set sweep.variants")
    assert cli.main(["plan", "-c", "sweep.variants=q17-k5:Qwen/Qwen3-1.7B:5"]) == cli.EXIT_USAGE
    assert capsys.readouterr().err.startswith("config error: neuron_nodes.desired_size=1: leaves no room for a sweep pod")
    assert cli.main(["plan", "-c", "nokey"]) == cli.EXIT_USAGE
    assert capsys.readouterr().err == "specbench: -c 'nokey': expected KEY=VALUE\n"
