"""A stored run's files read back (``<results>/<run_id>/`` through a specbench.results.store.RunStore):
run.json, every record and every acceptance figure. Standard library only: the benchmark Job, the
aggregation Lambda and the report all read runs this way.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from specbench.results.records import RequestRecord, read_jsonl
from specbench.results.store import effective_status


class RunFiles:
    """What ``summarize_run`` reads from a run folder (a specbench.results.store.RunStore), and the folder's keys."""

    def __init__(
        self, run: dict[str, Any], records: list[RequestRecord], acceptance: dict[str, dict[str, dict[str, Any]]], keys: list[str]
    ) -> None:
        self.run, self.records, self.acceptance, self.keys = run, records, acceptance, keys


def load_records(store: Any, keys: Sequence[str] | None = None) -> list[RequestRecord]:
    records: list[RequestRecord] = []
    for key in store.keys("records/") if keys is None else keys:
        if key.startswith("records/") and key.endswith(".jsonl"):
            records.extend(read_jsonl(store.read(key).splitlines()))
    return records


def load_acceptance(store: Any, keys: Sequence[str] | None = None) -> dict[str, dict[str, dict[str, Any]]]:
    """test case -> endpoint -> acceptance figures."""
    figures = {}
    for key in store.keys("acceptance/") if keys is None else keys:
        if key.startswith("acceptance/") and key.endswith(".json"):
            figures[key.rsplit("/", 1)[-1][: -len(".json")]] = json.loads(store.read(key))
    return figures


def load_run(store: Any) -> RunFiles:
    """run.json (empty when absent: an imported run), every record and every acceptance file; the
    folder is listed once."""
    keys = store.keys()
    run = json.loads(store.read("run.json")) if "run.json" in keys else {}
    status = effective_status(run, store) if isinstance(run, dict) else ""
    if run and status != run.get("status"):  # "running", but its writer is gone: killed (issue 22)
        run = {**run, "status": status, "error": run.get("error") or "the run's process ended before it finished (killed?)"}
    return RunFiles(run, load_records(store, keys), load_acceptance(store, keys), keys)
