"""How late an in-thread emulator's own event loop wakes, measured while it serves (issue 24)."""

from __future__ import annotations

import asyncio
import threading

from specbench.emulator import server as em


def loop_lateness(server: em.EmulatorServer, step_s: float, stop: threading.Event) -> list[float]:
    """How late the server's own event loop wakes for absolute deadlines one step apart, while it
    serves: the same loop, thread and machine load as the engine, so the reference for the
    engine's lateness is measured at the same moment instead of assumed. The list fills until
    ``stop`` is set."""
    lateness: list[float] = []

    async def probe() -> None:
        deadline = em.CLOCK()
        while not stop.is_set():
            deadline += step_s
            await em._sleep_until(deadline)
            lateness.append(em.CLOCK() - deadline)

    asyncio.run_coroutine_threadsafe(probe(), server._loop)  # type: ignore[arg-type]
    return lateness
