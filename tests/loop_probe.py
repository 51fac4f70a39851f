"""When an in-thread emulator's engine completed each step, and whether it let its loop run first.

A chunk is handed to its stream when its step completes (``Engine.complete`` puts it in the
stream's outbox); the stream's task, woken by that, is on the loop's ready queue before the engine's
next sleep can end (asyncio runs the ready callbacks of a pass before the timers that fall due in
it), so it stamps the chunk before the engine completes its next step, unless the engine was so
late that it went on without sleeping. That ordering holds at any load, where a bound on lateness
(compared with a probe's wake-ups, as before) failed at a load average of 8: a chunk held for the
next step is stamped after that step completes.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field

import pytest

from specbench.emulator import server as em


@dataclass
class EnginePasses:
    """Per step index of the one engine that ran: when it completed, and whether the engine gave
    its loop a pass (slept until the step's deadline, or idled) since the step before."""

    completed_s: list[float] = field(default_factory=list)
    yielded: list[bool] = field(default_factory=list)
    _since: bool = False
    _engines: set[int] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def chunk_bounds(self, record: em.TruthRecord) -> list[tuple[float, float, float | None]]:
        """For each chunk of the record: (stamp, its step's completion, the completion of the next
        step before which the engine gave the loop a pass, or None when it never did)."""
        assert len(self._engines) == 1, "one engine a recording"
        bounds = []
        for offset, step in zip(record.chunk_offsets_s, record.steps, strict=True):
            later = next((self.completed_s[k] for k in range(step + 1, len(self.yielded)) if self.yielded[k]), None)
            bounds.append((record.arrival_s + offset, self.completed_s[step], later))
        return bounds


def record_engine_passes(monkeypatch: pytest.MonkeyPatch) -> EnginePasses:
    """Record every step the emulator engines complete while the test runs (non-coalescing profiles:
    with coalesce_chunks a chunk waits for the next ones by design)."""
    passes = EnginePasses()
    complete, idle = em.Engine.complete, em.Engine._idle

    async def sleep_until(deadline: float) -> None:  # em._sleep_until, noting whether it slept
        delay = deadline - em.CLOCK()
        if delay > 0:
            passes._since = True
            await asyncio.sleep(delay)

    async def idling(self: em.Engine, now: float) -> None:
        passes._since = True
        await idle(self, now)

    def completing(self: em.Engine, *args, **kwargs):  # type: ignore[no-untyped-def]
        assert self.profile.coalesce_chunks == 0, "a coalescing profile holds chunks for the next steps"
        with passes._lock:
            passes._engines.add(id(self))
            passes.completed_s.append(em.CLOCK())
            passes.yielded.append(passes._since)
            passes._since = False
        return complete(self, *args, **kwargs)

    monkeypatch.setattr(em, "_sleep_until", sleep_until)
    monkeypatch.setattr(em.Engine, "_idle", idling)
    monkeypatch.setattr(em.Engine, "complete", completing)
    return passes
