#!/usr/bin/env python3
"""Where `make test`'s time goes: collection, syntheses, lint, test bodies, and idle worker time.

    make bench-suite    # or: .venv/bin/python scripts/bench_suite.py [--workers N] [-- pytest args]

Runs the suite as `make test` does (``pytest -n <cores + 1> --dist loadgroup``, bytecode cached, temporary files on tmpfs) with this
file loaded as a pytest plugin (``-p bench_suite``) in the controller and every worker. Each process
writes a timeline: when it started, when collection began and ended, and for each test its start,
end, its own CPU (every thread of the worker: in-process servers included) and the CPU of the child
processes it waited for. The syntheses leave their start and end marks and, from bash's ``times``,
their CPU in the session's assemblies folder (tests/conftest.py). The report splits each worker's
wall time into start-up and collection, test bodies on CPU, test bodies waiting (wall minus CPU:
loopback servers, sleeps, a synthesis not yet done, jsii's Node.js process), and idle (no test
running: waiting for the other worker at the end); then the syntheses, the slowest files, and how
many cores the whole machine kept busy in each second of the run. CPU and wall figures are both
printed: on a shared machine only the CPU figures compare. Across machines, or days of one virtual
machine, not even those do: a fixed workload timed before and after the suite (the yardstick) gives
the suite's CPU in yardsticks, which does.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROFILE_DIR_ENV = "SPECDECODE_SUITE_PROFILE_DIR"
APPS_MARKS = "apps-"  # tests/conftest.py: one process synthesizing several apps leaves apps-<app>+<app>.rc, ...
LINT_FILES = {"tests/test_lint.py", "tests/test_style.py"}


# --- the plugin: one timeline per process ----------------------------------------------------------


def _cpu() -> tuple[float, float]:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


class _Timeline:
    def __init__(self, folder: Path) -> None:
        name = os.environ.get("PYTEST_XDIST_WORKER", "controller")
        self._out = (folder / f"{name}.jsonl").open("a")
        self.event("start")

    def event(self, kind: str, **fields) -> None:
        own, children = _cpu()
        record = {"event": kind, "t": time.monotonic(), "cpu": own, "children": children, **fields}
        self._out.write(json.dumps(record) + "\n")
        self._out.flush()


_TIMELINE: _Timeline | None = None


def pytest_configure(config) -> None:
    global _TIMELINE
    folder = os.environ.get(PROFILE_DIR_ENV)
    if folder and _TIMELINE is None:
        _TIMELINE = _Timeline(Path(folder))


def pytest_collection(session) -> None:
    if _TIMELINE:
        _TIMELINE.event("collection-start")


def pytest_collection_finish(session) -> None:
    if _TIMELINE:
        _TIMELINE.event("collection-end", tests=len(session.items))


def pytest_runtest_logstart(nodeid, location) -> None:
    if _TIMELINE:
        _TIMELINE.event("test-start", id=nodeid)


def pytest_runtest_logfinish(nodeid, location) -> None:
    if _TIMELINE:
        _TIMELINE.event("test-end", id=nodeid)


def pytest_testnodedown(node, error) -> None:  # pytest-xdist, in the controller: a worker has exited
    if _TIMELINE:
        _TIMELINE.event("worker-down", worker=node.gateway.id)


def pytest_unconfigure(config) -> None:
    if _TIMELINE:
        _TIMELINE.event("unconfigure")


def pytest_sessionfinish(session, exitstatus) -> None:
    if _TIMELINE:
        base = session.config._tmp_path_factory.getbasetemp()
        root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
        _TIMELINE.event("end", assemblies=str(root / "assemblies"), exitstatus=int(exitstatus))


# --- the report ----------------------------------------------------------------------------------


def _read(folder: Path) -> dict[str, list[dict]]:
    return {path.stem: [json.loads(line) for line in path.read_text().splitlines()] for path in sorted(folder.glob("*.jsonl"))}


def _bash_times(text: str) -> float:
    """CPU of the children from bash's ``times`` (second line: ``0m8.123s 0m1.234s``)."""
    lines = text.strip().splitlines()
    if len(lines) < 2:
        return float("nan")
    return sum(int(m) * 60 + float(s) for m, s in re.findall(r"(\d+)m([\d.]+)s", lines[1]))


def _syntheses(assemblies: Path) -> list[tuple[str, float, float, float]]:
    """(name, started, ended, CPU s) of each synthesis process, on the monotonic clock of the
    timelines, and within a process that synthesizes several apps (``apps-direct+rehearsal+variant``,
    tests/synth_apps.py), each app's end after it, its CPU counted with the process's (NaN)."""
    offset = time.monotonic() - time.time()  # file times are wall-clock times
    found = []
    for times in sorted(assemblies.glob("*.times")):
        name = times.stem
        rc = assemblies / f"{name}.rc"
        if not rc.exists():
            continue
        # The session marks an app's start (<app>.started); a process's shell writes its pid first thing.
        mark = assemblies / f"{name}.started"
        started = (mark if mark.exists() else assemblies / f"{name}.pid").stat().st_mtime + offset
        found.append((name, started, rc.stat().st_mtime + offset, _bash_times(times.read_text())))
        if name.startswith(APPS_MARKS):
            apps = [app for app in name.removeprefix(APPS_MARKS).split("+") if (assemblies / f"{app}.rc").exists()]
            found += [(f"  {app}", started, (assemblies / f"{app}.rc").stat().st_mtime + offset, float("nan")) for app in apps]
    return found


def _most(events: list[dict], field: str) -> float:
    """A process's CPU (``cpu``: its own; ``children``: of the children it waited for) by its last mark."""
    return max((event[field] for event in events), default=0.0)


def report(timelines: dict[str, list[dict]], wall: float, total_cpu: float) -> str:
    workers = {name: events for name, events in timelines.items() if name != "controller"}
    session_start = min(events[0]["t"] for events in timelines.values())
    session_end = max(events[-1]["t"] for events in timelines.values())
    cores = os.cpu_count() or 1
    lines = [
        f"wall {wall:.1f} s, CPU of the whole process tree {total_cpu:.1f} s ({cores} cores: {total_cpu / wall / cores:.0%} busy)",
        f"the workers' own CPU {sum(_most(e, 'cpu') for e in workers.values()):.1f} s, their child processes'"
        f" {sum(_most(e, 'children') for e in workers.values()):.1f} s;"
        f" the controller's own {_most(timelines.get('controller', []), 'cpu'):.1f} s",
        "",
        "| worker | start-up + collection s (CPU s) | tests on CPU s | tests waiting s | idle s | tests |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    per_file: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    for name, events in workers.items():
        by_kind = defaultdict(list)
        for event in events:
            by_kind[event["event"]].append(event)
        collected = by_kind["collection-end"][0]
        startup_wall = collected["t"] - session_start
        on_cpu = waiting = 0.0
        open_test: dict | None = None
        for event in events:
            if event["event"] == "test-start":
                open_test = event
            elif event["event"] == "test-end" and open_test:
                test_wall = event["t"] - open_test["t"]
                cpu = (event["cpu"] - open_test["cpu"]) + (event["children"] - open_test["children"])
                if cpu > test_wall * 2:  # reaped a detached synthesis: its CPU is the syntheses' (their .times)
                    cpu = event["cpu"] - open_test["cpu"]
                on_cpu += min(cpu, test_wall)
                waiting += max(test_wall - cpu, 0.0)
                entry = per_file[event["id"].split("::")[0]]
                entry[0] += test_wall
                entry[1] += cpu
                entry[2] += 1
                open_test = None
        idle = (session_end - session_start) - startup_wall - on_cpu - waiting
        last_test_end = max((e["t"] for e in by_kind["test-end"]), default=collected["t"])
        lines.append(
            f"| {name} | {startup_wall:.1f} ({collected['cpu']:.1f}) | {on_cpu:.1f} | {waiting:.1f} | {idle:.1f}"
            f" ({session_end - last_test_end:.1f} after its last test) | {collected['tests']} |"
        )
    assemblies = Path(next(e["assemblies"] for events in timelines.values() for e in events if e["event"] == "end"))
    lines += ["", "| synthesis | starts at s | ends at s | wall s | CPU s |", "| --- | --- | --- | --- | --- |"]
    synth_total = 0.0
    for name, started, ended, cpu in _syntheses(assemblies):
        synth_total += 0.0 if math.isnan(cpu) else cpu
        shown = "(in the process above)" if math.isnan(cpu) else f"{cpu:.1f}"
        lines.append(f"| {name} | {started - session_start:.1f} | {ended - session_start:.1f} | {ended - started:.1f} | {shown} |")
    lint = [per_file[f] for f in LINT_FILES if f in per_file]
    lines += [
        "",
        f"syntheses {synth_total:.1f} s CPU; lint tests (cfn-lint, cdk-nag report, ruff) {sum(e[0] for e in lint):.1f} s wall,"
        f" {sum(e[1] for e in lint):.1f} s CPU; test bodies {sum(e[1] for e in per_file.values()):.1f} s CPU",
        "",
        "| slowest files | wall s | CPU s | tests |",
        "| --- | --- | --- | --- |",
    ]
    for path, (test_wall, cpu, count) in sorted(per_file.items(), key=lambda item: -item[1][0])[:15]:
        lines.append(f"| {path} | {test_wall:.1f} | {cpu:.1f} | {count} |")
    return "\n".join(lines)


def machine_cpu() -> tuple[int, int] | None:
    """The machine's CPU time so far, all and idle (idle + iowait), in clock ticks: /proc/stat's
    first line (Linux proc(5): user nice system idle iowait irq softirq steal ...); None elsewhere."""
    try:
        ticks = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None
    return sum(ticks), ticks[3] + ticks[4]


def busy_cores(samples: list[tuple[int, int]], cores: int) -> list[float]:
    """Cores busy between each two samples of machine_cpu (pure): the share of ticks not idle, times
    the cores. It shows what one figure of the whole run hides: cores idle while tests wait."""
    busy = []
    for (total0, idle0), (total1, idle1) in zip(samples, samples[1:], strict=False):
        ticks = total1 - total0
        busy.append(cores * (ticks - (idle1 - idle0)) / ticks if ticks > 0 else 0.0)
    return busy


def _sample_every_second(samples: list[tuple[int, int]], stop: threading.Event) -> None:
    while True:
        sample = machine_cpu()
        if sample is not None:
            samples.append(sample)
        if stop.wait(1.0):
            return


def yardstick_work() -> int:
    """A fixed pure-Python workload of the suite's kinds (loops and arithmetic, dicts and strings,
    JSON, compiling source): the same instructions on every machine, so its CPU time measures the
    machine. Returns a checksum of what it computed, so none of it can be skipped."""
    total = 0
    for i in range(600_000):
        total += i % 7
    table = {f"key-{i}": [i, str(i), {"v": i * 0.5}] for i in range(30_000)}
    text = json.dumps(table)
    total += len(json.loads(text)) + len(text)
    source = "\n".join(f"def f{i}(x):\n    return [x * {i} for _ in range(3)]" for i in range(600))
    return total + len(compile(source, "<yardstick>", "exec").co_consts)


def yardstick(runs: int = 5) -> tuple[float, int]:
    """The workload's CPU seconds on this machine (the median of ``runs``) and its checksum."""
    times, checksum = [], 0
    for _ in range(runs):
        started = time.process_time()
        checksum = yardstick_work()
        times.append(time.process_time() - started)
    return sorted(times)[len(times) // 2], checksum


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--workers", type=int, default=len(os.sched_getaffinity(0)) + 1, help="pytest-xdist workers (default, as make test: cores + 1)"
    )
    parser.add_argument("--dist", default="loadgroup", help="pytest-xdist's distribution mode (make test: loadgroup)")
    parser.add_argument("--keep", type=Path, help="a folder to keep the timelines in (one JSON Lines file per process)")
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments, after --")
    args = parser.parse_args(argv)
    yardstick_before, _ = yardstick()
    with tempfile.TemporaryDirectory(prefix="suite-profile-") as folder:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env[PROFILE_DIR_ENV] = folder
        if "TMPDIR" not in env and os.access("/dev/shm", os.W_OK):  # as `make test` (Makefile, TEST_TMPDIR)
            env["TMPDIR"] = "/dev/shm"
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "scripts"), env.get("PYTHONPATH")]))
        command = [sys.executable, "-m", "pytest", "-n", str(args.workers), "--dist", args.dist, "-q", "-p", "bench_suite"]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        samples: list[tuple[int, int]] = []
        stop = threading.Event()
        sampler = threading.Thread(target=_sample_every_second, args=(samples, stop), daemon=True)
        started = time.monotonic()
        sampler.start()
        result = subprocess.run([*command, *args.pytest_args], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
        wall = time.monotonic() - started
        stop.set()
        sampler.join()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        total_cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        print(result.stdout.strip().splitlines()[-1] if result.stdout.strip() else "(no pytest output)")
        print(report(_read(Path(folder)), wall, total_cpu))
        per_yardstick = (yardstick_before + yardstick()[0]) / 2
        print(
            f"\nmachine yardstick (yardstick_work, median of 5 before and after the suite): {yardstick_before:.3f} s before,"
            f" {per_yardstick:.3f} s on average; the suite's CPU is {total_cpu / per_yardstick:,.0f} yardsticks"
        )
        if len(samples) > 1:
            shown = " ".join(f"{value:.1f}" for value in busy_cores(samples, os.cpu_count() or 1))
            print(f"\ncores busy, each second of the run (the whole machine, /proc/stat): {shown}")
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
            for path in Path(folder).glob("*.jsonl"):
                (args.keep / path.name).write_bytes(path.read_bytes())
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
