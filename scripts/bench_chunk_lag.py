#!/usr/bin/env python3
"""How late the native engine stamps each streamed chunk, against the server's own write times.

    make bench-chunk-lag    # or: .venv/bin/python scripts/bench_chunk_lag.py [--repeats N] [--streams 4 64]

A paced OpenAI-style streaming server runs in its own process on two loopback ports (two
endpoints, as baseline and speculative). Like vLLM it answers with chunked transfer encoding: a
role frame, one content frame per step carrying cumulative usage, a finish frame, then
``data: [DONE]``. Requests differ in length (so slots free while other streams are mid-stream, as in
a real run) and every content frame's write is logged with ``time.perf_counter()`` just before the
write. On Linux that is CLOCK_MONOTONIC, one clock for both processes, so the lag of a chunk is
``client stamp - server write``: the client's ``sent_monotonic_s + chunk_times_s[i]``.

Two server modes (``--server``):
- ``mixed``: requests of 12 to 48 chunks, each paced from its own arrival, a finish frame of its own;
- ``in-step``: as a batching engine streams, every request is paced on one step clock (a request
  joins at the next step boundary) and all have the same length, so the streams of a wave start
  and end in step, and the next wave is launched while the last ones are still arriving. The
  frames are vLLM's (vllm/entrypoints/openai/serving_chat.py, chat_completion_stream_generator):
  a role frame (``delta: {role: assistant, content: ""}``), content frames with continuous usage,
  the last content frame carrying ``finish_reason`` itself, then the ``include_usage`` frame
  (``choices: []``) and ``data: [DONE]``, written back to back with the last content frame.

Two placements (``--placement``, both by default): ``own-cpu`` runs the server on a CPU of its own and
the client on the others, as a vLLM server on another machine; ``shared`` lets both run anywhere, so
on a small machine the server's bursts of writes take the client's CPU (a loopback write's sync
wake-up queues the client behind the writer, for up to the scheduler's slice). ``--pin`` is
``--placement own-cpu``. The native engine drives both endpoints at once (as the runner does) with ``--streams`` in flight in
all (half per endpoint), and the lag distribution of first, middle and last content chunks, and of
all of them, is printed (p50 / p90 / max), with the machine's state: the load average and the share
of the run the client's loop thread waited for a CPU (``wait``; a chunk arriving then waits too).
Target: p90 within 2 ms for every kind of chunk at 64 streams, in both modes; each median row is
followed by whether it is met.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import math
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from specbench.emulator.process import free_ports  # noqa: E402
from specbench.load.native import NativeEngine  # noqa: E402
from specbench.load.types import Endpoint, LoadSpec, PreparedCase  # noqa: E402
from specbench.prompts.suite import DEFAULT_SUITE  # noqa: E402

STEP_S = 0.020  # one content frame per step, as vLLM streams one chunk per engine step
TTFT_S = 0.030
MIN_CHUNKS, MAX_CHUNKS = 12, 48
IN_STEP_CHUNKS = 24  # every request of the in-step mode
SERVER_MODES = ("mixed", "in-step")
PLACEMENTS = ("shared", "own-cpu")
TARGET_P90_MS = 2.0  # every kind of content chunk at 64 streams


def chunks_of(request_id: str) -> int:
    """Mixed, deterministic lengths: the request index spreads them over MIN..MAX chunks."""
    index = int(request_id.rsplit("-", 1)[-1]) if request_id.rsplit("-", 1)[-1].isdigit() else 0
    return MIN_CHUNKS + (index * 7) % (MAX_CHUNKS - MIN_CHUNKS + 1)


def step_schedule(arrival: float, epoch: float, chunks: int) -> list[float]:
    """In-step mode: when each content frame of a request arriving at ``arrival`` is due, on the step
    clock that started at ``epoch``: the first at the first step boundary TTFT_S or more after the
    arrival, then one every step (pure; the same boundaries for every request of a wave)."""
    first = epoch + math.ceil((arrival + TTFT_S - epoch) / STEP_S - 1e-9) * STEP_S
    return [first + index * STEP_S for index in range(chunks)]


def serve(ports: list[int], mode: str = "mixed") -> None:
    """The paced server (run in its own process by ``main``)."""
    from aiohttp import web

    epoch = time.perf_counter()

    writes: dict[str, list[float]] = {}
    peers: set = set()  # client connections that carried requests: keep-alive reuse shows here

    def frame(event: dict) -> bytes:
        return b"data: " + json.dumps(event).encode() + b"\n\n"

    async def chat(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        arrival = time.perf_counter()
        request_id = request.headers.get("X-Request-Id", "unknown")
        peers.add(request.transport.get_extra_info("peername") if request.transport else None)
        log = writes.setdefault(request_id, [])
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        base = {"id": request_id, "object": "chat.completion.chunk", "model": body.get("model", "")}
        if mode == "in-step":
            await in_step(response, base, log, arrival)
            return response
        chunks = chunks_of(request_id)
        await response.write(frame({**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}))
        for index in range(chunks):
            delay = arrival + TTFT_S + index * STEP_S - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            usage = {"prompt_tokens": 64, "completion_tokens": index + 1, "total_tokens": 65 + index}
            data = frame({**base, "choices": [{"index": 0, "delta": {"content": f" tok{index}"}}], "usage": usage})
            log.append(time.perf_counter())
            await response.write(data)
        usage = {"prompt_tokens": 64, "completion_tokens": chunks, "total_tokens": 64 + chunks}
        await response.write(frame({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}], "usage": usage}))
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    async def in_step(response: web.StreamResponse, base: dict, log: list[float], arrival: float) -> None:
        """vLLM's frames on the shared step clock (see the module docstring)."""

        def usage(completion: int) -> dict:
            return {"prompt_tokens": 64, "completion_tokens": completion, "total_tokens": 64 + completion}

        role = {"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}
        await response.write(frame({**base, "choices": [role], "usage": usage(0)}))
        due = step_schedule(arrival, epoch, IN_STEP_CHUNKS)
        for index, at in enumerate(due):
            delay = at - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            last = index == len(due) - 1
            choice = {"index": 0, "delta": {"content": f" tok{index}"}, "logprobs": None, "finish_reason": "length" if last else None}
            data = frame({**base, "choices": [choice], "usage": usage(index + 1)})
            if last:  # the finish_reason frame, the include_usage frame and [DONE] leave together
                data += frame({**base, "choices": [], "usage": usage(index + 1)}) + b"data: [DONE]\n\n"
            log.append(time.perf_counter())
            await response.write(data)
        await response.write_eof()

    async def health(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def dump(request: web.Request) -> web.Response:
        text = json.dumps({"writes": writes, "connections": len(peers)})
        writes.clear()
        peers.clear()
        return web.Response(text=text, content_type="application/json")

    async def main() -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", chat)
        app.router.add_get("/health", health)
        app.router.add_get("/writes", dump)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        for port in ports:
            await web.TCPSite(runner, "127.0.0.1", port).start()
        await asyncio.Event().wait()

    asyncio.run(main())


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as response:  # noqa: S310 - loopback
        return response.read()


def start_server(ports: list[int], mode: str = "mixed", niceness: int = 0, cpus: set[int] | None = None) -> subprocess.Popen:
    """The paced server in its own process, ``niceness`` above this one's (see --server-nice).

    Why nicer: a write to a loopback socket wakes its reader with a sync wake-up (Linux
    net/core/sock.c, sock_def_readable: ``wake_up_interruptible_sync_poll``; kernel/sched/wait.c,
    __wake_up_sync_key: the woken thread "will not be migrated to another CPU"), so a client woken
    by the server's first write of a burst can wait on the server's CPU until the burst ends."""
    process = subprocess.Popen([sys.executable, __file__, "serve", mode, *map(str, ports)])
    if cpus:  # --pin
        os.sched_setaffinity(process.pid, cpus)
    if niceness:
        os.setpriority(os.PRIO_PROCESS, process.pid, os.getpriority(os.PRIO_PROCESS, 0) + niceness)
    deadline = time.monotonic() + 30
    while True:
        try:
            if all(get(f"http://127.0.0.1:{port}/health") == b"ok" for port in ports):
                return process
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the paced server did not start") from None
            time.sleep(0.05)


def niceness(text: str) -> int:
    """--server-nice: a whole number 0..19 (what nice(1) allows an unprivileged user to add)."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 19:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number from 0 to 19")
    return value


def engine_class(spec: str) -> type:
    """``module:Class``, e.g. an older copy of the engine to compare against on the same server."""
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


async def drive(endpoints: list[Endpoint], streams: int, waves: int, engine_type: type = NativeEngine) -> list:
    per_endpoint = max(1, streams // len(endpoints))
    load = LoadSpec("bench", MAX_CHUNKS, per_endpoint, per_endpoint * waves, 60.0)
    prepared = PreparedCase(DEFAULT_SUITE.test_cases[0], "count with me", 4)
    engine = engine_type()
    results = await asyncio.gather(*(engine.run(e, prepared, load, "lag", lambda record: None) for e in endpoints))
    return [record for records in results for record in records]


def lags(records: list, writes: dict[str, list[float]]) -> tuple[dict[str, list[float]], int]:
    """Lag in ms of every content chunk, by position (first, middle, last) and all together; and the errors."""
    found: dict[str, list[float]] = {"first": [], "middle": [], "last": [], "all": []}
    errors = 0
    for record in records:
        if not record.ok:
            errors += 1
            continue
        server = writes[f"lag-{record.variant}-{record.test_case}-{record.request_index}"]
        if len(server) != len(record.chunk_times_s):
            errors += 1  # chunks merged or lost: not comparable one to one
            continue
        last = len(server) - 1
        for index, (offset, written) in enumerate(zip(record.chunk_times_s, server, strict=True)):
            position = "first" if index == 0 else "last" if index == last else "middle"
            lag = (record.sent_monotonic_s + offset - written) * 1000
            found[position].append(lag)
            found["all"].append(lag)
    return found, errors


def run_on(loop: str, coroutine):  # type: ignore[no-untyped-def]
    """``default`` is what ``specbench run`` uses (specbench/commands/common.py run_coroutine); ``asyncio`` and ``uvloop`` force one."""
    if loop == "default":
        from specbench.commands.common import run_coroutine

        return run_coroutine(coroutine)
    if loop == "uvloop":
        import uvloop

        return uvloop.run(coroutine)
    return asyncio.run(coroutine)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


KINDS = ("first", "middle", "last", "all")  # content chunks by position in their request, then all of them


def run_delay_s() -> float | None:
    """Seconds this thread has waited on a run queue so far (runnable, no CPU given): the second
    field of /proc/thread-self/schedstat, in nanoseconds (Linux Documentation/scheduler/sched-stats.rst:
    "time spent waiting on a runqueue (in nanoseconds)"); None where the kernel does not keep it."""
    try:
        return int(Path("/proc/thread-self/schedstat").read_text().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return None


def measure(
    ports: list[int], streams: int, waves: int, engine_type: type = NativeEngine, loop: str = "default"
) -> tuple[dict[str, tuple[float, float, float]], int, int, float, str]:
    """Lag figures by chunk position, errors, connections used, client CPU microseconds per chunk,
    and the machine's state: the load average (1 minute) when the run ended and the share of the run
    the client's event loop thread was runnable but waiting for a CPU (a chunk arriving then waits too)."""
    endpoints = [Endpoint(name, f"http://127.0.0.1:{port}") for name, port in zip(("base", "spec"), ports, strict=True)]
    cpu, waited, began = time.process_time(), run_delay_s(), time.perf_counter()
    records = run_on(loop, drive(endpoints, streams, waves, engine_type))
    cpu, elapsed = time.process_time() - cpu, time.perf_counter() - began
    after = run_delay_s()
    state = _loadavg().split()[0] + (f" {100 * (after - waited) / elapsed:4.0f}%" if waited is not None and after is not None else "")
    writes: dict[str, list[float]] = {}
    connections = 0
    for port in ports:
        logged = json.loads(get(f"http://127.0.0.1:{port}/writes"))
        writes.update(logged["writes"])
        connections += logged["connections"]
    found, errors = lags(records, writes)
    figures = {k: (percentile(v, 0.5), percentile(v, 0.9), max(v)) for k, v in found.items() if v}
    return figures, errors, connections, cpu / max(1, sum(r.chunks for r in records)) * 1e6, state


def main() -> None:
    if sys.argv[1:2] == ["serve"]:
        serve([int(port) for port in sys.argv[3:]], sys.argv[2])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--streams", type=int, nargs="+", default=[4, 64], help="streams in flight in all, half per endpoint")
    parser.add_argument("--waves", type=int, default=3, help="requests per slot")
    parser.add_argument(
        "--server", nargs="+", default=list(SERVER_MODES), choices=SERVER_MODES, help="server mode(s); each runs on its own server"
    )
    parser.add_argument("--repeats", type=int, default=3, help="runs per setting; the table shows each and their median")
    parser.add_argument(
        "--engine",
        nargs="+",
        default=["specbench.load.native:NativeEngine"],
        help="module:Class of each engine; several run in turn, one run each per repeat, so a busy machine weighs on all alike",
    )
    parser.add_argument(
        "--loop", nargs="+", default=["default"], choices=("default", "asyncio", "uvloop"), help="event loop(s) of the client"
    )
    parser.add_argument(
        "--server-nice",
        type=niceness,
        default=0,
        help="run the server this much nicer than the client (default 0): a loopback write wakes the client "
        "on the writer's CPU, where a busy server holds it until its burst of writes ends; nicer, it is preempted "
        "(a server on another machine never holds the client's CPU). Lags stay server write to client stamp; on a "
        "busy machine a nicer server is also preempted between its stamp and its write, which counts as lag",
    )
    parser.add_argument(
        "--placement",
        nargs="+",
        choices=PLACEMENTS,
        help="own-cpu: the server on a CPU of its own (the last one this process may use), the client on the others, "
        "as a server on another machine: no sync wake-up can hold the client on the server's CPU (needs 2 CPUs); "
        "shared: both anywhere. Default: both where there are 2 CPUs, else shared",
    )
    parser.add_argument("--pin", action="store_true", help="the same as --placement own-cpu")
    args = parser.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    placements = ["own-cpu"] if args.pin else args.placement or [p for p in PLACEMENTS if p == "shared" or len(cpus) > 1]
    if "own-cpu" in placements and len(cpus) < 2:
        parser.error("--placement own-cpu (--pin) needs at least 2 CPUs")
    engines = {(spec, loop): engine_class(spec) for spec in args.engine for loop in args.loop}
    for placement in placements:
        # own-cpu: the server on the last CPU this process may use, this client (loop and parse threads) on the others
        server_cpus = {cpus[-1]} if placement == "own-cpu" else None
        os.sched_setaffinity(0, set(cpus[:-1]) if server_cpus else set(cpus))
        for mode in args.server:
            bench_mode(mode, args, engines, server_cpus)
    os.sched_setaffinity(0, set(cpus))


def bench_mode(mode: str, args: argparse.Namespace, engines: dict, server_cpus: set[int] | None) -> None:
    ports = free_ports(2)
    server = start_server(ports, mode, args.server_nice, server_cpus)
    try:
        lengths = f"{IN_STEP_CHUNKS} chunks a request, in step" if mode == "in-step" else f"{MIN_CHUNKS}-{MAX_CHUNKS} chunks a request"
        where = ", server on a CPU of its own" if server_cpus else ", server and client sharing the CPUs"
        nicer = (f", server {args.server_nice} nicer" if args.server_nice else "") + where
        print(f"{mode} server: client stamp - server write, ms (steps {STEP_S * 1000:g} ms, {lengths}{nicer}; load {_loadavg()})")
        columns = " ".join(f"{k + ' p50/p90/max':>24}" for k in KINDS)
        print(f"{'streams':>7} {'run':>6} {columns}  errors connections cpu/chunk  load wait")
        for streams in args.streams:
            runs: dict[tuple[str, str], list] = {key: [] for key in engines}
            for _ in range(args.repeats):
                for (spec, loop), engine_type in engines.items():
                    runs[spec, loop].append(measure(ports, streams, args.waves, engine_type, loop))
            for (spec, loop), measured in runs.items():
                if len(engines) > 1:
                    print(f"{spec} on the {loop} loop")
                _print_runs(streams, measured)
    finally:
        server.terminate()
        server.wait(timeout=10)


def _print_runs(streams: int, runs: list) -> None:
    for number, (figures, errors, connections, cpu, load) in enumerate(runs, 1):
        cells = " ".join(_cell(figures.get(k)) for k in KINDS)
        print(f"{streams:>7} {number:>6} {cells}  {errors:>6} {connections:>10} {cpu:>7.0f}us {load:>5}")
    median = {k: tuple(statistics.median(run[0][k][i] for run in runs if k in run[0]) for i in range(3)) for k in KINDS}
    cpu = statistics.median(run[3] for run in runs)
    print(f"{streams:>7} {'median':>6} " + " ".join(_cell(median[k]) for k in KINDS) + f"{cpu:>27.0f}us")
    if streams >= 64:  # the target's load
        print(f"{'':>14} {target_verdict(median)}")


def target_verdict(median: dict[str, tuple[float, float, float]]) -> str:
    """Whether the median run's p90 of first, middle and last chunks is each within TARGET_P90_MS."""
    over = [f"{kind} {median[kind][1]:.2f} ms" for kind in ("first", "middle", "last") if median[kind][1] > TARGET_P90_MS]
    return f"p90 within {TARGET_P90_MS:g} ms: " + ("met" if not over else "not met (" + ", ".join(over) + ")")


def _loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def _cell(values: tuple[float, float, float] | None) -> str:
    return f"{'-':>24}" if values is None else f"{values[0]:>8.2f}{values[1]:>8.2f}{values[2]:>8.2f}"


if __name__ == "__main__":
    main()
