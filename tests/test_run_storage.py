"""Stored means stored (issue 22): records journalled as each request completes, run.json replaced
atomically, a killed run read as interrupted, a used --run-id refused, strict JSON."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import signal
import subprocess
import sys
import threading
from datetime import datetime, timedelta, timezone

import pytest

from specbench import cli, jsonfile
from specbench.emulator.server import EmulatorServer, default_profiles
from specbench.results.records import read_jsonl
from specbench.results.runfiles import load_run
from specbench.results.store import STALE_AFTER_S, LocalStore, RunStore, S3Store, StoreError, effective_status
from tests import moto_aws
from tests.runs import BASELINE, SPECULATIVE, emulated_run_args, wait_for, write_run

SCALE = 0.1


def test_kill_9_mid_test_case_keeps_every_completed_request_and_reads_as_interrupted(tmp_path, capsys):
    """A real `kill -9` of a real `specbench run` subprocess, mid-test-case. Each emulator stalls its
    requests of ordinals 5 and 7 (for minutes); with two slots, when ordinal 7 arrives at a server,
    requests 0-4 and 6 of that endpoint have completed and the client has moved on: 6 per endpoint."""
    profiles = default_profiles(time_scale=SCALE)
    stall = {5: "stall", 7: "stall"}
    base = dataclasses.replace(profiles["qwen-vllm"], faults=stall, stall_s=600.0)
    spec = dataclasses.replace(profiles["qwen-sd-vllm"], faults=stall, stall_s=600.0)
    with EmulatorServer(base) as baseline, EmulatorServer(spec) as speculative:
        args = emulated_run_args(baseline, speculative, tmp_path, "--run-id", "killed", "--no-publish")
        args += ["--test-case", "counting", "--concurrency", "2", "--requests", "8", "--output-tokens", "40"]
        process = subprocess.Popen([sys.executable, "-m", "specbench", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            # The live lists' lengths: ``server.truth`` would deep-copy every record at each poll.
            arrived = wait_for(lambda: len(baseline.emulator.truth) >= 8 and len(speculative.emulator.truth) >= 8)
            os.kill(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
        finally:
            process.kill()
        assert arrived, process.stderr.read().decode()[-2000:]
        truth = {BASELINE: baseline.truth, SPECULATIVE: speculative.truth}
    assert process.returncode == -signal.SIGKILL
    # The ground truth: which requests (by index, from their X-Request-Id) the servers finished.
    completed = {
        name: sorted(int(t.request_id.rsplit("-", 1)[1]) for t in records if t.e2e_s is not None) for name, records in truth.items()
    }
    assert [len(indices) for indices in completed.values()] == [6, 6]

    store = RunStore(LocalStore(tmp_path), "killed")
    on_disk = list(read_jsonl(store.read("records/counting.jsonl").splitlines()))
    found = {name: sorted(r.request_index for r in on_disk if r.variant == name) for name in truth}
    assert found == completed  # every completed request, none twice, none in flight
    assert all(r.ok for r in on_disk)
    print(f"kill -9: {sum(map(len, completed.values()))} requests completed, {len(on_disk)} found on disk")

    assert json.loads(store.read("run.json"))["status"] == "running"  # what the killed process left
    files = load_run(store)
    assert files.run["status"] == "interrupted" and len(files.records) == 12
    capsys.readouterr()
    out = tmp_path / "report"
    # --no-charts: what is checked is the text; drawing the PNGs cost ~0.5 s of CPU (charts are test_report's).
    assert cli.main(["report", "killed", "--results", str(tmp_path), "--out", str(out), "--resamples", "50", "--no-charts"]) == 0
    printed = capsys.readouterr().out
    assert "(partial)" in printed
    assert "run status is interrupted" in (out / "report.md").read_text()


class _Probe:
    """An engine whose each record is checked on disk the moment the runner takes it."""

    name = "probe"

    def __init__(self, path, requests: int) -> None:
        self.path, self.requests, self.lines_seen = path, requests, []

    async def run(self, endpoint, prepared, load, run_id, on_record):
        from specbench.results.records import RequestRecord

        records = []
        for index in range(self.requests):
            record = RequestRecord(run_id, endpoint.name, prepared.case.name, prepared.case.prompt_class, "probe", index, 1.0)
            record.error_code, record.error_msg = 500, "probe"
            on_record(record)
            self.lines_seen.append(len(self.path.read_text().splitlines()))
            records.append(record)
        return records


def _plan(endpoints, requests=3):
    from specbench.load.types import Endpoint, LoadSpec
    from specbench.prompts.suite import DEFAULT_SUITE
    from specbench.runner import RunPlan

    suite = DEFAULT_SUITE.select(["json"])
    load = LoadSpec(model="m", max_tokens=8, concurrency=1, requests=requests, request_timeout_s=5.0)
    return RunPlan(tuple(Endpoint(n, "http://127.0.0.1:9") for n in endpoints), suite, load, 16, "probe", ready_timeout_s=0.1)


def _run_probe(store, engine, monkeypatch):
    import asyncio

    from specbench import runner as runner_module

    async def ready(*args, **kwargs):
        return None

    monkeypatch.setattr(runner_module, "wait_ready", ready)
    monkeypatch.setattr(runner_module, "read_acceptance_snapshots", lambda e, m: asyncio.sleep(0, {x.name: (None, "none") for x in e}))
    monkeypatch.setattr(runner_module, "prepare_case", lambda case, plan, log: (runner_module.PreparedCase(case, "p", 4), "probe"))
    return asyncio.run(runner_module.Runner(_plan(["a"]), engine, store, progress=False).run())


def test_each_record_is_on_disk_before_the_engine_goes_on(tmp_path, monkeypatch):
    store = RunStore(LocalStore(tmp_path), "journal")
    engine = _Probe(tmp_path / "journal" / "records" / "json.jsonl", requests=3)
    result = _run_probe(store, engine, monkeypatch)
    assert engine.lines_seen == [1, 2, 3]
    assert result.status == "completed"
    run = json.loads(store.read("run.json"))
    assert run["status"] == "completed" and run["counts"]["requests"] == 3 and run["heartbeat"]
    assert not list(tmp_path.rglob("*.partial")) and not (tmp_path / "journal" / ".lock").exists()


def _lines(run) -> int:
    return run.read("records/case.jsonl").count("\n") if run.keys("records/") else 0


def test_s3_journal_puts_the_case_records_as_they_complete(monkeypatch):
    moto_aws.offline_environment(monkeypatch)
    with moto_aws.mocked():  # the shared session's S3 client: its model is read once per test process
        s3 = moto_aws.bucket("journal-bucket", "us-east-2")
        run = RunStore(S3Store("journal-bucket", "results/", s3), "s3run")
        journal = run.journal("records/case.jsonl")
        for index in range(5):
            journal.append(json.dumps({"i": index}) + "\n")
            # The background PUT lands: the object holds at least this line (coalesced, never reordered).
            assert wait_for(lambda i=index: _lines(run) >= i + 1, 20)
        journal.close()
        assert [json.loads(line)["i"] for line in run.read("records/case.jsonl").splitlines()] == [0, 1, 2, 3, 4]


def test_atomic_replace_leaves_no_partial_and_readers_never_see_half(tmp_path):
    store = LocalStore(tmp_path)
    big = [json.dumps({"n": n, "pad": "x" * 20000}) for n in range(40)]
    seen: list[str] = []
    stop = threading.Event()

    def reader():
        while not stop.is_set():
            try:
                seen.append(store.read_text("r/run.json"))
            except FileNotFoundError:
                pass

    thread = threading.Thread(target=reader)
    thread.start()
    # Replace the file until the reader has read it many times (on tmpfs, where fsync costs nothing,
    # 40 writes can be over before the reader's first turn); bounded in writes.
    writes = 0
    while (len(seen) < 50 or writes < len(big)) and writes < 20_000:
        store.write_text("r/run.json", big[writes % len(big)])
        writes += 1
    stop.set()
    thread.join()
    assert seen and all(json.loads(text)["pad"] for text in seen)  # every read a whole file
    assert os.listdir(tmp_path / "r") == ["run.json"]


def test_a_run_whose_writer_is_gone_reads_as_interrupted(tmp_path):
    store = RunStore(LocalStore(tmp_path), "r")
    write_run(store, status="running")
    assert effective_status({"status": "running"}, store) == "running"  # no lock file: an older run keeps its word
    lock = store.lock()
    assert lock.acquire()
    assert effective_status({"status": "running"}, store) == "running"
    assert not RunStore(LocalStore(tmp_path), "r").lock().acquire()  # a second writer is refused
    os.close(lock._fd)  # the process dies: the kernel drops the lock, the file stays
    lock._fd = None
    assert effective_status({"status": "running"}, store) == "interrupted"
    assert load_run(store).run["status"] == "interrupted"
    assert effective_status({"status": "completed"}, store) == "completed"


def test_a_stale_heartbeat_reads_as_interrupted_on_s3():
    now = datetime(2026, 12, 1, 12, tzinfo=timezone.utc)
    s3 = RunStore(S3Store("b", "p/", client=None), "r")
    fresh = {"status": "running", "heartbeat": (now - timedelta(seconds=10)).isoformat()}
    stale = {"status": "running", "heartbeat": (now - timedelta(seconds=STALE_AFTER_S + 1)).isoformat()}
    assert effective_status(fresh, s3, now) == "running"
    assert effective_status(stale, s3, now) == "interrupted"
    assert effective_status({"status": "running", "heartbeat": "garbage"}, s3, now) == "running"


def test_keys_that_leave_the_store_are_refused(tmp_path):
    store = LocalStore(tmp_path / "results")
    for key in ("../x", "a/../../x", "/etc/x", "a/../.."):
        with pytest.raises(StoreError, match="leaves"):
            store.write_text(key, "x")
    assert not (tmp_path / "x").exists()


def test_strict_json_names_the_non_finite_value():
    assert jsonfile.dumps({"a": 1.5}) == '{"a": 1.5}'
    for value, where in (({"a": {"b": [1, math.nan]}}, "a.b[1]"), ([math.inf], "[0]"), (-math.inf, "the value")):
        with pytest.raises(ValueError, match=r"not written: " + where.replace("[", r"\[").replace("]", r"\]")):
            jsonfile.dumps(value)


def test_no_bare_json_dumps_left_in_the_package():
    """Every JSON the package writes goes through jsonfile.dumps (strict)."""
    import ast
    import unicodedata
    from pathlib import Path

    root = Path(cli.__file__).resolve().parent
    found = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text()
        # Parsing the whole package costs ~0.4 s of CPU: parse only the files that can hold json.dump(s),
        # whose identifiers (NFKC-normalized, as Python reads them) must spell "json" and "dump".
        normalized = unicodedata.normalize("NFKC", text)
        if path.name == "jsonfile.py" or "json" not in normalized or "dump" not in normalized:
            continue
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Attribute) and node.attr in ("dump", "dumps") and getattr(node.value, "id", "") == "json":
                if "nothing is written here" in text.splitlines()[node.lineno - 1]:
                    continue  # outputs/cloudwatch.py sizes a request as botocore serializes it
                found.append(f"{path.relative_to(root)}:{node.lineno}")
    assert found == []
