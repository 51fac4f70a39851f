"""scripts/bench_suite.py's split of a suite run (`make bench-suite`): each worker's start-up and
collection, test bodies on CPU and waiting, idle time, and the syntheses' marks, from timelines
whose figures are known."""

from __future__ import annotations

import json
import math
import os

from scripts.bench_suite import _bash_times, _read, busy_cores, machine_cpu, report, yardstick

CHECKSUM = 3_185_046  # yardstick_work()'s: see test_the_yardstick_is_the_same_work_on_every_machine


def test_bash_times_gives_the_childrens_cpu():
    # bash's `times`: the shell's own user and system time, then its children's.
    assert _bash_times("0m0.003s 0m0.001s\n0m8.123s 1m1.250s\n") == 8.123 + 61.25
    assert math.isnan(_bash_times("0m0.003s 0m0.001s\n"))  # no children line: unknown, never 0


def _timeline(folder, name, events):
    (folder / f"{name}.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))


def test_each_workers_wall_time_is_split_into_start_up_cpu_waiting_and_idle(tmp_path):
    assemblies = tmp_path / "assemblies"
    assemblies.mkdir()
    (assemblies / "cli.started").touch()
    (assemblies / "cli.rc").write_text("0\n")
    (assemblies / "cli.times").write_text("0m0.002s 0m0.001s\n0m8.000s 0m1.500s\n")
    started = (assemblies / "cli.started").stat().st_mtime
    os.utime(assemblies / "cli.rc", (started + 12.5, started + 12.5))
    # Two apps in one process (tests/synth_apps.py): the process's CPU once, each app's end.
    (assemblies / "apps-direct+variant.pid").write_text("42\n")
    for name, ends in (("direct", 3.0), ("variant", 7.0), ("apps-direct+variant", 7.5)):
        (assemblies / f"{name}.rc").write_text("0\n")
        os.utime(assemblies / f"{name}.rc", (started + ends, started + ends))
    os.utime(assemblies / "apps-direct+variant.pid", (started, started))
    (assemblies / "apps-direct+variant.times").write_text("0m0.002s 0m0.001s\n0m5.000s 0m0.500s\n")
    timelines = tmp_path / "timelines"
    timelines.mkdir()
    end = {"event": "end", "t": 100.0, "cpu": 0.0, "children": 0.0, "assemblies": str(assemblies)}
    _timeline(timelines, "controller", [{"event": "start", "t": 60.0, "cpu": 0.0, "children": 0.0}, {**end, "t": 100.0}])
    _timeline(
        timelines,
        "gw0",
        [
            {"event": "start", "t": 60.5, "cpu": 0.2, "children": 0.0},
            {"event": "collection-end", "t": 63.0, "cpu": 1.5, "children": 0.0, "tests": 2},
            {"event": "test-start", "t": 63.0, "cpu": 1.5, "children": 0.0, "id": "tests/test_a.py::one"},
            # 2 s of its own CPU and 0.5 s of a child's in 4 s: 1.5 s waiting
            {"event": "test-end", "t": 67.0, "cpu": 3.5, "children": 0.5, "id": "tests/test_a.py::one"},
            {"event": "test-start", "t": 67.0, "cpu": 3.5, "children": 0.5, "id": "tests/test_lint.py::two"},
            {"event": "test-end", "t": 68.0, "cpu": 4.5, "children": 0.5, "id": "tests/test_lint.py::two"},
            {**end, "t": 90.0},
        ],
    )
    text = report(_read(timelines), wall=40.0, total_cpu=50.0)
    lines = text.splitlines()
    # start-up 3 s (1.5 s CPU); tests on CPU 2.5 + 1 = 3.5 s; waiting 1.5 s; idle 40 - 3 - 3.5 - 1.5
    assert "| gw0 | 3.0 (1.5) | 3.5 | 1.5 | 32.0 (32.0 after its last test) | 2 |" in lines
    assert "| cli | " in text and "| 12.5 | 9.5 |" in text
    assert "| apps-direct+variant | " in text and "| 7.5 | 5.5 |" in text
    assert any(line.startswith("|   direct | ") and line.endswith("| 3.0 | (in the process above) |") for line in lines)
    assert any(line.startswith("|   variant | ") and line.endswith("| 7.0 | (in the process above) |") for line in lines)
    assert "syntheses 15.0 s CPU; lint tests (cfn-lint, cdk-nag report, ruff) 1.0 s wall, 1.0 s CPU; test bodies 3.5 s CPU" in lines
    assert "| tests/test_a.py | 4.0 | 2.5 | 1 |" in lines
    assert lines[0].startswith("wall 40.0 s, CPU of the whole process tree 50.0 s")
    assert lines[1] == "the workers' own CPU 4.5 s, their child processes' 0.5 s; the controller's own 0.0 s"


def test_cores_busy_each_second_from_the_machines_cpu_ticks():
    # Two cores: 200 ticks a second; 200 busy, then 60 of 200, then no tick at all.
    samples = [(1000, 500), (1200, 500), (1400, 640), (1400, 640)]
    assert busy_cores(samples, 2) == [2.0, 0.6, 0.0]
    assert busy_cores(samples[:1], 2) == []
    sample = machine_cpu()
    assert sample is None or (sample[0] >= sample[1] >= 0)


def test_the_yardstick_is_the_same_work_on_every_machine():
    """Its checksum pinned: a changed workload would make figures in yardsticks from before and after
    incomparable (docs/performance.md), so changing it means changing this value and those figures."""
    seconds, checksum = yardstick(runs=1)
    assert checksum == CHECKSUM
    assert seconds > 0
