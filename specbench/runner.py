"""One benchmark run: wait for the endpoints, then for each test case drive identical traffic at
every endpoint at once, read draft acceptance around it, and store everything before publishing.

Storage layout of a run (``<results>/<run_id>/``):
    run.json                        settings snapshot, parameters, status, counts, heartbeat (replaced
                                    atomically at the start, at each test case's end, every
                                    HEARTBEAT_S, and at the end)
    records/<case>.jsonl            every request of every endpoint, raw chunk timings included: a line
                                    appended as each request completes, replaced by the case's records
                                    in order at its end (specbench/results/store.py says how, on S3 too)
    .lock                           held while the run lives (a directory store): a reader finding it
                                    free and run.json "running" reads the run as interrupted
    acceptance/<case>.json          per endpoint: acceptance rate, mean length, per position, or why missing
    llmperf/<endpoint>/<case>/      llmperf-format summary and individual_responses files
    publish.json, unpublished.json  what reached CloudWatch, and what did not (republish with `publish`)
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

import aiohttp

from specbench import jsonfile
from specbench.analysis import acceptance as acceptance_math
from specbench.analysis import cost
from specbench.load.endpoints import Observer, TokenizeError, estimate_tokens, fetch_metrics, token_counter, wait_ready
from specbench.load.types import Endpoint, Engine, LoadSpec, PreparedCase
from specbench.prompts.suite import LLMPERF_PREAMBLE, Suite, TestCase, fill_prompt
from specbench.results import llmperf_format
from specbench.results.records import FIGURE_DEFINITIONS, INTERRUPTED, RequestRecord, error_kinds
from specbench.results.store import HEARTBEAT_S, RunStore, StoreError

Log = Callable[[str], None]


def new_run_id(now: datetime | None = None) -> str:
    now = now or datetime.now(timezone.utc)
    return now.strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:6]


@dataclass(frozen=True)
class RunPlan:
    endpoints: tuple[Endpoint, ...]
    suite: Suite
    load: LoadSpec
    input_tokens: int
    engine: str
    ready_timeout_s: float = 900.0
    settings: dict[str, Any] = field(default_factory=dict)  # the deployment's snapshot (settings.json)
    sweep: dict[str, Any] = field(default_factory=dict)  # a sweep point's metadata (specbench/sweep/points.py), or empty
    # Several load levels: every test case runs at each (``load`` with its concurrency or request
    # rate replaced); files and records then carry the level (``<case>@c4``). Empty: ``load`` alone,
    # stored exactly as a single-level run always was.
    levels: tuple[LoadSpec, ...] = ()
    # Endpoint -> role as ``run``'s flags say it (specbench/results/roles.py), for runs without a snapshot.
    roles: dict[str, Any] = field(default_factory=dict)

    @property
    def loads(self) -> tuple[LoadSpec, ...]:
        return self.levels or (self.load,)

    def snapshot(self) -> dict[str, Any]:
        extra = {"load_levels": [level.to_dict() for level in self.levels]} if self.levels else {}
        if self.roles:
            extra["roles"] = self.roles
        return {
            **extra,
            "endpoints": [asdict(e) for e in self.endpoints],
            "suite": self.suite.to_dict(),
            "load": self.load.to_dict(),
            "input_tokens": self.input_tokens,
            "engine": self.engine,
            "ready_timeout_s": self.ready_timeout_s,
            "deployment": self.settings,
        }


@dataclass
class CaseOutcome:
    test_case: str
    records: list[RequestRecord]
    acceptance: dict[str, dict[str, Any]]
    outputs_match: bool | None


class EngineFailed(RuntimeError):
    """An engine raised for one or more endpoints; every endpoint's records were stored first."""


@dataclass
class RunResult:
    run_id: str
    status: str  # completed | failed | interrupted | not-ready
    cases: list[CaseOutcome] = field(default_factory=list)
    error: str = ""

    @property
    def records(self) -> list[RequestRecord]:
        return [record for case in self.cases for record in case.records]


def prepare_case(case: TestCase, plan: RunPlan, log: Log) -> tuple[PreparedCase, str]:
    """The prompt for a test case, sized with the served model's tokenizer via the first endpoint.
    A dataset case sends its sampled prompts as they are: each request's size comes from usage."""
    if case.items:
        return PreparedCase(case, "", 0), f"dataset prompts as sampled ({len(case.items)}), sizes from the stream's usage"
    preamble = LLMPERF_PREAMBLE.format(output_tokens=plan.load.max_tokens)
    counter = token_counter(plan.endpoints[0], plan.load.model)
    try:
        prompt, tokens = fill_prompt(case.text, plan.input_tokens, counter, preamble)
        return PreparedCase(case, prompt, tokens), "served model tokenizer (/tokenize)"
    except TokenizeError as error:
        log(f"{case.name}: /tokenize unavailable ({type(error).__name__}); prompt sized by a 4-characters-a-token estimate")
        prompt, tokens = fill_prompt(case.text, plan.input_tokens, estimate_tokens, preamble)
        return PreparedCase(case, prompt, tokens), "estimate (4 characters a token)"


def outputs_match(records: list[RequestRecord]) -> bool | None:
    """Whether every successful request of one prompt produced the same text (greedy and lossless);
    a dataset case's prompts (prompt_id) are compared each with itself."""
    digests: dict[str, set[str]] = {}
    for record in records:
        if record.ok and record.output_sha256:
            digests.setdefault(record.prompt_id, set()).add(record.output_sha256)
    return None if not digests else all(len(found) == 1 for found in digests.values())


def case_load(load: LoadSpec, case: TestCase) -> LoadSpec:
    """The load of one test case: its own max_tokens when the suite gives one (a summary is short, code long)."""
    return replace(load, max_tokens=case.max_tokens) if case.max_tokens else load


async def read_acceptance_snapshots(endpoints: tuple[Endpoint, ...], model: str) -> dict[str, tuple[Any, str]]:
    async with aiohttp.ClientSession() as session:
        texts = await asyncio.gather(*(fetch_metrics(session, endpoint) for endpoint in endpoints))
    snapshots = {}
    for endpoint, (text, why) in zip(endpoints, texts, strict=False):
        if text is None:
            snapshots[endpoint.name] = (None, why)
            continue
        try:
            snapshots[endpoint.name] = (acceptance_math.parse_spec_decode(text, model), "")
        except ValueError as error:
            snapshots[endpoint.name] = (None, f"/metrics unreadable: {error}")
    return snapshots


def acceptance_figures(before: tuple[Any, str], after: tuple[Any, str], model: str | None = None) -> dict[str, Any]:
    if before[0] is None or after[0] is None:
        return {"source": "missing", "reason": before[1] or after[1]}
    return acceptance_math.acceptance_between(before[0], after[0], model).to_dict()


class Runner:
    def __init__(
        self, plan: RunPlan, engine: Engine, store: RunStore, log: Log = print, progress: bool = True, readiness: Observer | None = None
    ) -> None:
        """``readiness``: told what the readiness wait sees after each poll (outputs/readiness.py publishes it)."""
        self.plan, self.engine, self.store, self.log, self.progress = plan, engine, store, log, progress
        self.readiness = readiness
        self.run_json: dict[str, Any] = {}
        self.stored: dict[str, list[RequestRecord]] = {}  # test case -> the records in its stored file
        self.engine_failures: list[dict[str, str]] = []
        self._run_json_lock = threading.Lock()  # the heartbeat writes run.json from a thread

    def _save_run(self, **changes: Any) -> None:
        with self._run_json_lock:
            self.run_json.update(changes, heartbeat=_now())
            self.store.write("run.json", jsonfile.dumps(self.run_json, indent=2, sort_keys=True, default=str))

    async def _heartbeat(self) -> None:
        """run.json's heartbeat, refreshed while the run lives (how an S3 reader tells a run that died)."""
        while True:
            await asyncio.sleep(HEARTBEAT_S)
            try:
                await asyncio.to_thread(self._save_run)
            except StoreError as error:  # a missed beat is not the run's failure; the next case's write says more
                self.log(f"run.json heartbeat not stored: {error}")

    async def run(self) -> RunResult:
        result = RunResult(self.store.run_id, "running")
        # Which definition each figure uses: the records', and throughput and cost (what "busy" means).
        self.run_json["figure_definitions"] = {**FIGURE_DEFINITIONS, **cost.FIGURE_DEFINITIONS}
        if self.plan.sweep:
            self.run_json["sweep"] = self.plan.sweep
        lock = self.store.lock()
        if not lock.acquire():
            raise StoreError(f"{self.store.location} is being written by another run (its .lock is held)")
        self._save_run(
            run_id=result.run_id, status="running", started=_now(), location=self.store.location, plan=self.plan.snapshot(), cases={}
        )
        heartbeat = asyncio.ensure_future(self._heartbeat())
        try:
            endpoints, model = list(self.plan.endpoints), self.plan.load.model
            await wait_ready(endpoints, model, self.plan.ready_timeout_s, log=self.log, observe=self.readiness)
            start = getattr(self.engine, "start", None)  # an engine's set-up (llmperf: Ray), once, before any request
            if start is not None:
                await start(self.plan.endpoints, self.plan.load)
            for case in self.plan.suite.test_cases:
                prepared: tuple[PreparedCase, str] | None = None
                for load in self.plan.loads:
                    prepared = prepared or await asyncio.to_thread(prepare_case, case, self.plan, self.log)
                    result.cases.append(await self._run_case(case, load, prepared))
            result.status = "completed"
        except asyncio.CancelledError:
            result.status, result.error = "interrupted", "cancelled (SIGTERM or Ctrl-C)"
            raise
        except Exception as error:  # noqa: BLE001 - recorded in run.json, then re-raised
            result.status = "not-ready" if type(error).__name__ == "NotReadyError" else "failed"
            result.error = f"{type(error).__name__}: {error}"
            raise
        finally:
            heartbeat.cancel()
            close = getattr(self.engine, "close", None)
            if close is not None:
                close()
            # Counted from what is stored, cut-short test cases included, so the counts match the files.
            stored = [record for records in self.stored.values() for record in records]
            totals = {**counts(stored), "engine_failures": len(self.engine_failures)}
            try:
                # issue 22: failed requests per kind (records.ERROR_KINDS), beside counts.
                self._save_run(status=result.status, error=result.error, finished=_now(), counts=totals, error_kinds=error_kinds(stored))
            finally:
                lock.release()
        return result

    async def _run_case(self, case: TestCase, load: LoadSpec, prepared_case: tuple[PreparedCase, str]) -> CaseOutcome:
        prepared, sizing = prepared_case
        level = load.level if self.plan.levels else ""
        key = f"{case.name}@{level}" if level else case.name  # the files' and run.json's name of this case at this load
        before = await read_acceptance_snapshots(self.plan.endpoints, load.model)
        done: list[RequestRecord] = []
        bar = _progress_bar(key, len(self.plan.endpoints) * load.requests, self.progress)
        # Stored as each request completes: a line appended (and flushed) before the engine goes on.
        journal = self.store.journal(f"records/{key}.jsonl")

        def on_record(record: RequestRecord) -> None:
            record.load_level = level
            done.append(record)
            journal.append(record.to_json() + "\n")
            bar.update(1)
            if not record.ok and record.error_kind != "not_sent":  # not_sent: the engine says it once
                bar.write(f"{record.variant} {case.name} #{record.request_index}: error {record.error_code}: {record.error_msg[:120]}")

        started, wall_start = time.perf_counter(), int(time.time())
        endpoints = self.plan.endpoints
        try:
            # Every endpoint's engine runs to its end (or is cancelled with the others) before anything
            # is written: one engine raising must not cut another's records short.
            load = case_load(load, case)  # this level's load, with the case's own max_tokens
            outcomes = await asyncio.gather(
                *(self.engine.run(e, prepared, load, self.store.run_id, on_record) for e in endpoints), return_exceptions=True
            )
        finally:
            bar.close()
            journal.close()
            # Persistence first: whatever completed is stored even if the case was cut short; the
            # journal is replaced by the case's records in order, at once.
            done.sort(key=lambda r: (r.variant, r.request_index))
            self.store.write(f"records/{key}.jsonl", "".join(record.to_json() + "\n" for record in done))
            self.stored[key] = list(done)
            cases = dict(self.run_json.get("cases", {}))
            cases[key] = {
                "prompt_tokens": prepared.prompt_tokens,
                "prompt_sizing": sizing,
                **counts(done),
                "error_kinds": error_kinds(done),
            }
            self._save_run(cases=cases)
        failed = {e.name: outcome for e, outcome in zip(endpoints, outcomes, strict=True) if isinstance(outcome, BaseException)}
        for name, error in failed.items():
            self.engine_failures.append({"test_case": key, "endpoint": name, "error": f"{type(error).__name__}: {error}"})
        if failed:
            self._save_run(engine_failures=self.engine_failures)
            raise EngineFailed(
                f"test case {key}: the {self.plan.engine} engine failed for "
                + "; ".join(f"{name} ({type(error).__name__}: {error})" for name, error in failed.items())
                + f"; {stored_line(done, endpoints, load.requests)}"
            ) from next(iter(failed.values()))
        elapsed = time.perf_counter() - started
        after = await read_acceptance_snapshots(self.plan.endpoints, load.model)
        figures = {e.name: acceptance_figures(before[e.name], after[e.name], load.model) for e in self.plan.endpoints}
        self.store.write(f"acceptance/{key}.json", jsonfile.dumps(figures, indent=2, sort_keys=True))
        self._write_llmperf_files(key, load, done, elapsed, wall_start)
        outcome = CaseOutcome(key, done, figures, outputs_match(done))
        cases = dict(self.run_json.get("cases", {}))
        cases[key] = {**cases[key], "outputs_match": outcome.outputs_match}
        self._save_run(cases=cases)
        return outcome

    def _write_llmperf_files(self, key: str, load: LoadSpec, records: list[RequestRecord], elapsed: float, timestamp: int) -> None:
        for endpoint in self.plan.endpoints:
            run = llmperf_format.LlmperfRun(
                model=load.model,
                input_tokens=self.plan.input_tokens,
                output_tokens=load.max_tokens,  # the case's own when the suite sets one
                concurrency=load.concurrency,
                sampling_params=load.sampling_params(),
                elapsed_s=elapsed,
                timestamp=timestamp,
                metadata={"specbench_run_id": self.store.run_id, "specbench_variant": endpoint.name, "specbench_test_case": key},
            )
            files = llmperf_format.result_files([r for r in records if r.variant == endpoint.name], run)
            for name, text in files.items():
                self.store.write(f"llmperf/{endpoint.name}/{key}/{name}", text)


def stored_line(done: list[RequestRecord], endpoints: tuple[Endpoint, ...], requests: int) -> str:
    """What was stored of a test case, per endpoint, against what was planned: never more than is true."""
    per = {e.name: sum(1 for r in done if r.variant == e.name) for e in endpoints}
    short = [f"{name} {n} of {requests}" for name, n in per.items() if n != requests]
    what = f"{len(done)} of {len(endpoints) * requests} records stored"
    return what + (f" (missing: {', '.join(short)})" if short else "")


def counts(records: list[RequestRecord]) -> dict[str, int]:
    """Requests, failed ones (interrupted included), and those interrupted in flight."""
    return {
        "requests": len(records),
        "errors": sum(1 for r in records if not r.ok),
        "interrupted": sum(1 for r in records if r.error_code == INTERRUPTED),
    }


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class _NoBar:
    def update(self, n: int) -> None: ...

    def write(self, text: str) -> None:
        print(text)

    def close(self) -> None: ...


def _progress_bar(name: str, total: int, enabled: bool) -> Any:
    if not enabled:
        return _NoBar()
    from tqdm import tqdm

    return tqdm(total=total, desc=name, unit="req", dynamic_ncols=True, mininterval=1.0)
