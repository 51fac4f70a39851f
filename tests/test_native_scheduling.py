"""The native engine's scheduling around the stamps (issue 24): ending a stream and launching the
next request wait for the reads already waiting to be stamped, and requests are launched one at a
time. Measured with scripts/bench_chunk_lag.py --server in-step (docs/performance.md)."""

from __future__ import annotations

import asyncio
import collections

import pytest

from specbench.load import native
from specbench.load.native import NativeEngine, SendTime


def test_ends_and_launches_wait_until_a_pass_stamps_no_read():
    engine = NativeEngine()
    passes: list[int] = []

    async def reads_for(count: int) -> None:  # another stream: one read stamped every pass, `count` times
        for _ in range(count):
            engine._reads += 1
            passes.append(engine._reads)
            await asyncio.sleep(0)

    async def settle_beside(count: int) -> int:
        reader = asyncio.ensure_future(reads_for(count))
        await asyncio.sleep(0)  # the reader has started
        await engine._reads_settled()
        settled_at = engine._reads
        await reader
        return settled_at

    # Reads during 5 passes: it waits them out, so every one of them is stamped first.
    assert asyncio.run(settle_beside(5)) == 5
    engine._reads = 0
    # Reads that never stop: it gives up after SETTLE_PASSES double passes, never starving the end.
    settled_at = asyncio.run(settle_beside(10 * native.SETTLE_PASSES))
    assert 2 * native.SETTLE_PASSES - 2 <= settled_at <= 2 * native.SETTLE_PASSES + 4  # + the hops to wake the waiter


async def released_ends(engine: NativeEngine, count: int, cancel_first: bool = False) -> list[tuple[int, int]]:
    """``count`` stream ends waiting in ``engine._reads_settled`` together: each live end's index and
    the pass of the loop it was released in, in release order; ``cancel_first`` cancels end 0 once
    all wait (its stream gone). The engine's queue of waiters is empty afterwards."""
    passes = 0

    async def count_passes() -> None:
        nonlocal passes
        while True:
            passes += 1
            await asyncio.sleep(0)

    counter = asyncio.ensure_future(count_passes())
    released: list[tuple[int, int]] = []

    async def end(index: int) -> None:
        await engine._reads_settled()
        released.append((index, passes))

    tasks = [asyncio.ensure_future(end(i)) for i in range(count)]
    await asyncio.sleep(0)  # all wait in _reads_settled
    if cancel_first:
        tasks[0].cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    counter.cancel()
    assert engine._settling == collections.deque()
    return released


def test_ends_waiting_together_go_one_a_pass_in_order_and_all_at_once_past_the_bound(monkeypatch):
    """A wave that finished in step: its ends wait together and are released one at a time, with
    the loop polling in between (scripts/bench_chunk_lag.py --server in-step --pin: the wave's last
    chunks 2.3-3.3 ms late at p90 when released together, 0.4 ms one a pass); once the oldest has
    waited SETTLE_MAX_S, all go in the same pass."""
    released = asyncio.run(released_ends(NativeEngine(), 4))
    assert [index for index, _ in released] == [0, 1, 2, 3]
    assert all(later - earlier >= 2 for (_, earlier), (_, later) in zip(released, released[1:], strict=False))
    monkeypatch.setattr(native, "SETTLE_MAX_S", 0.0)
    released = asyncio.run(released_ends(NativeEngine(), 4))
    assert len({at for _, at in released}) == 1


def test_a_cancelled_end_takes_no_turn():
    """The first live end goes after the same passes of the loop whether or not an end queued before
    it was cancelled (its stream gone): a cancelled waiter is skipped, never waited out."""
    index, plain = asyncio.run(released_ends(NativeEngine(), 3))[0]
    assert index == 0
    index, after_a_cancelled_one = asyncio.run(released_ends(NativeEngine(), 3, cancel_first=True))[0]
    assert index == 1 and after_a_cancelled_one == plain


def test_requests_are_launched_one_at_a_time_until_each_body_is_written():
    engine = NativeEngine()
    order: list[str] = []

    async def launch(name: str, written: asyncio.Event, fail: bool = False) -> None:
        sent = SendTime(0.0)
        try:
            await engine._launch_turn(sent)
            order.append(f"{name} launched")
            if fail:
                raise OSError("refused before the body was written")
            await written.wait()
            order.append(f"{name} written")
            sent.wrote()
        except OSError:
            order.append(f"{name} failed")
        finally:
            sent.wrote()  # as collect does: a turn never outlives its request

    async def main() -> None:
        first, second, third = asyncio.Event(), asyncio.Event(), asyncio.Event()
        tasks = [asyncio.ensure_future(launch("a", first)), asyncio.ensure_future(launch("b", second, fail=True))]
        tasks.append(asyncio.ensure_future(launch("c", third)))
        for _ in range(50):
            await asyncio.sleep(0)
        assert order == ["a launched"]  # b and c wait for a's body to be written
        first.set()
        for _ in range(50):
            await asyncio.sleep(0)
        third.set()
        await asyncio.gather(*tasks)

    asyncio.run(main())
    assert order == ["a launched", "a written", "b launched", "b failed", "c launched", "c written"]
    # A new event loop gets its own lock (an engine may run on several loops, one after another).
    order.clear()
    asyncio.run(main())
    assert order[0] == "a launched"


def test_a_launch_that_never_writes_its_body_holds_the_next_for_a_bounded_time():
    engine = NativeEngine()

    async def main() -> float:
        loop = asyncio.get_running_loop()
        stuck = SendTime(0.0)
        await engine._launch_turn(stuck)  # its connection hangs: the body is never written
        started = loop.time()
        await engine._launch_turn(SendTime(0.0))
        return loop.time() - started

    waited = asyncio.run(main())
    assert native.LAUNCH_TURN_MAX_S * 0.9 <= waited < native.LAUNCH_TURN_MAX_S + 1.0  # the bound, not forever


def test_a_finished_stream_is_parsed_off_the_loop_and_stored_before_the_slots_next_request(monkeypatch):
    """_hand_over parses in the engine's parser thread: a parse that takes 300 ms (a stand-in for a
    long stream on a slow machine) never stops the loop from stamping other streams' reads, and the
    record is handed over, on the loop, before _hand_over returns (the slot's next request waits)."""
    import threading
    import time

    from specbench.load.native import CircuitBreaker, RawStream
    from specbench.load.types import Endpoint
    from specbench.results.records import RequestRecord

    loop_thread: list[int] = []
    parse_thread: list[int] = []
    parsing: list[float] = []  # when the parse began and ended

    def slow_digest(raw):  # type: ignore[no-untyped-def]
        parse_thread.append(threading.get_ident())
        parsing.append(time.perf_counter())
        time.sleep(0.3)
        parsing.append(time.perf_counter())
        return raw.record, None

    monkeypatch.setattr(native, "digest", slow_digest)
    engine = NativeEngine()
    raw = RawStream(RequestRecord("r", "v", "case", "c", "native", 0, 0.0))
    handed_over: list[RequestRecord] = []

    async def main() -> list[float]:
        loop_thread.append(threading.get_ident())
        ticks: list[float] = []
        done = asyncio.Event()

        async def ticker() -> None:  # what stamping other streams needs: the loop, every millisecond
            while not done.is_set():
                await asyncio.sleep(0.001)
                ticks.append(time.perf_counter())

        ticking = asyncio.ensure_future(ticker())
        started, handed = [raw], []
        await engine._hand_over(raw, started, handed, handed_over.append, Endpoint("v", "http://127.0.0.1:1"), CircuitBreaker(8))
        assert handed_over == [raw.record] and started == []  # stored before _hand_over returned
        done.set()
        await ticking
        return ticks

    ticks = asyncio.run(main())
    assert parse_thread and parse_thread[0] != loop_thread[0]
    # The loop ran while the parse did (parsed on the loop, it would stand still for the whole 0.3 s):
    # an ordering on one clock, where a bound on the loop's longest gap (150 ms) depends on the load.
    began, ended = parsing
    assert any(began < tick < ended for tick in ticks), (began, ended, ticks[:5])


@pytest.mark.servers  # a real-time loopback server: scheduled first (tests/conftest.py)
def test_a_records_wall_clock_start_is_when_its_body_was_written_not_when_it_asked(monkeypatch):
    """started_at (the wall clock: CloudWatch's timestamps and every busy window, analysis/cost.window)
    and sent_monotonic_s (where TTFT and every chunk's stamp count from) are one moment, the body's
    write, however long a request waited for its launch turn. Taken when it asked, started_at ran
    ahead of the end-to-end latency by the wait: busy windows shifted by waits of different lengths
    overlapped as they never did on the wire, and a paced run's throughput came out above what the
    servers' own record allows (tests/test_cost.py, 1 run in 5 on a busy machine)."""
    import time

    from specbench.emulator.server import EmulatorProfile, EmulatorServer
    from specbench.load.types import Endpoint, LoadSpec, PreparedCase
    from specbench.prompts.suite import DEFAULT_SUITE

    wait_s = 0.08
    turn = NativeEngine._launch_turn

    async def late_turn(self, sent: SendTime) -> None:  # a turn that comes wait_s late
        await asyncio.sleep(wait_s)
        await turn(self, sent)

    monkeypatch.setattr(NativeEngine, "_launch_turn", late_turn)
    case = DEFAULT_SUITE.test_cases[0]
    with EmulatorServer(EmulatorProfile(target_step_s=0.002, prefill_base_s=0.002, prefill_s_per_token=0.0)) as server:
        load = LoadSpec("Qwen/Qwen3-32B", 4, 2, 3, 30.0)
        records = asyncio.run(NativeEngine().run(Endpoint("svc", server.url), PreparedCase(case, case.text, 5), load, "r", lambda r: None))
    wall_minus_monotonic = time.time() - time.perf_counter()
    assert len(records) == 3 and all(r.ok for r in records), [r.error_msg for r in records]
    for r in records:
        # The two clocks' offset, to well within the wait (it moves only if the wall clock is set).
        assert abs(r.started_at - r.sent_monotonic_s - wall_minus_monotonic) < wait_s / 4, r.request_index
