#!/usr/bin/env python3
"""Synth and test-suite figures for docs/performance.md: wall time and peak memory (whole process tree).

    make bench            # or: .venv/bin/python scripts/bench_synth.py [--runs N] [--skip-tests]

Measures, each as the median of N runs: `python app.py` (the full platform, with cdk-nag and
CloudFormation validation), `npx cdk synth` (the same through the CLI), and the yardstick
scripts/minimal_app.py (one eks_v2 cluster, Trn2 node group, Helm chart, add-on, cdk8s chart,
Lambda), and the full platform without the serving charts (scripts/synth_without_serving.py), so
the synth time the charts add shows. Then each serving chart's manifest size against the kubectl
provider's 256 KB payload limit, and one run of `make test` with dependencies installed. Targets:
full synth at most 2x the yardstick; test command under 60 s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENV = {
    **os.environ,
    "PATH": f"{ROOT / 'node_modules' / '.bin'}{os.pathsep}{os.environ['PATH']}",
    "AWS_EC2_METADATA_DISABLED": "true",
    "CDK_DISABLE_CLI_TELEMETRY": "true",
}


def _tree_rss_kib(pid: int) -> int:
    """Resident memory of ``pid`` and all its descendants, from /proc."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        child = int(entry.name)
        children.setdefault(int(fields.get("PPid", "0").strip()), []).append(child)
        rss[child] = int(fields.get("VmRSS", "0 kB").split()[0]) if "VmRSS" in fields else 0
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        total += rss.get(current, 0)
        todo += children.get(current, [])
    return total


def measure(command: list[str]) -> tuple[float, int]:
    """(wall seconds, peak RSS of the process tree in MiB), sampling every 200 ms (sampling walks
    /proc, which itself costs CPU on a 2-core machine, so not more often)."""
    start = time.perf_counter()
    process = subprocess.Popen(command, cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = 0
    while process.poll() is None:
        peak = max(peak, _tree_rss_kib(process.pid))
        time.sleep(0.2)
    wall = time.perf_counter() - start
    if process.returncode:
        raise SystemExit(f"{' '.join(command)} failed:\n{process.stderr.read().decode()[-2000:]}")
    return wall, peak // 1024


def median_of(runs: int, make_command) -> tuple[float, int]:
    results = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as outdir:
            results.append(measure(make_command(outdir)))
    return statistics.median(w for w, _ in results), max(m for _, m in results)


PAYLOAD_LIMIT = 256 * 1024


def chart_sizes() -> list[tuple[str, int]]:
    """(manifest resource, bytes as the kubectl provider receives it) for every serving chart."""
    with tempfile.TemporaryDirectory() as outdir:
        measure([sys.executable, "app.py", "--outdir", outdir])
        template = json.loads((Path(outdir) / "SpecDecodePlatform.template.json").read_text())
    return [
        (lid, len(json.dumps(r["Properties"]["Manifest"])))
        for lid, r in template["Resources"].items()
        if r["Type"] == "Custom::AWSCDK-EKS-KubernetesResource"
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--skip-tests", action="store_true")
    args = parser.parse_args()
    python = sys.executable
    rows = [
        ("minimal eks_v2 app (yardstick)", median_of(args.runs, lambda out: [python, "scripts/minimal_app.py", out])),
        ("full platform, python app.py", median_of(args.runs, lambda out: [python, "app.py", "--outdir", out])),
        ("full platform, npx cdk synth", median_of(args.runs, lambda out: ["npx", "--no-install", "cdk", "synth", "-q", "-o", out])),
        (
            "full platform without serving charts, python app.py",
            median_of(args.runs, lambda out: [python, "scripts/synth_without_serving.py", "--outdir", out]),
        ),
    ]
    if not args.skip_tests:
        rows.append(("make test (deps installed)", measure(["make", "--no-print-directory", "test"])))
    print(f"machine: {os.cpu_count()} cores; median of {args.runs} runs (make test: 1 run)")
    print("| what | wall s | peak RSS MiB |\n| --- | --- | --- |")
    for name, (wall, peak) in rows:
        print(f"| {name} | {wall:.1f} | {peak} |")
    yardstick = rows[0][1][0]
    print(f"full synth / yardstick: {rows[1][1][0] / yardstick:.2f}x (target <= 2x)")
    print(f"synth time added by the serving charts: {rows[1][1][0] - rows[3][1][0]:+.1f} s")
    print("| serving chart manifest | bytes | of the 256 KB payload limit |\n| --- | --- | --- |")
    for lid, size in chart_sizes():
        print(f"| {lid} | {size} | {100 * size / PAYLOAD_LIMIT:.1f}% |")


if __name__ == "__main__":
    main()
