"""The timer glue of the group coordinator on a real event loop: one handle per key, a
re-armed key fires once at its new time, nothing fires after close."""

from __future__ import annotations

import asyncio

from logserver.groups.decisions import TimerKey, TimerKind
from logserver.groups.timers import Timers


def test_rearm_cancel_and_close():
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        fired: list[TimerKey] = []
        done = loop.create_future()

        def on_fire(key: TimerKey) -> None:
            fired.append(key)
            if key.member_id == "last":
                done.set_result(None)

        timers = Timers(lambda: loop, on_fire)
        moved = TimerKey(TimerKind.HEARTBEAT, "g", "moved")
        cancelled = TimerKey(TimerKind.HEARTBEAT, "g", "cancelled")
        last = TimerKey(TimerKind.HEARTBEAT, "g", "last")
        timers.arm(moved, 10)
        timers.arm(cancelled, 10)
        timers.arm(moved, 30)  # replaces the first request
        timers.cancel(cancelled)
        timers.arm(last, 60)
        assert len(timers) == 2
        await asyncio.wait_for(done, 5)
        assert fired == [moved, last]
        assert len(timers) == 0
        timers.arm(moved, 0)
        timers.close()
        timers.arm(last, 0)  # ignored after close
        assert len(timers) == 0 and not timers.is_armed(last)

    asyncio.run(scenario())
