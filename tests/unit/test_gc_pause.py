"""Issue 27: creating or loading thousands of partitions runs with the cyclic GC paused
(at 50,000 partitions the collector, scanning ever larger generations and finding no
garbage, was two thirds of a creation's CPU), and the pause always ends."""

from __future__ import annotations

import gc
import threading
from pathlib import Path

from logserver.gc_pause import gc_paused
from logserver.log import LogManager


def _collections_during(action) -> int:
    seen: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            seen.append(info["generation"])

    gc.callbacks.append(count)
    try:
        action()
    finally:
        gc.callbacks.remove(count)
    return len(seen)


def test_creating_and_loading_many_partitions_runs_no_collection(tmp_path: Path) -> None:
    assert gc.isenabled()
    mgr = LogManager(tmp_path)
    # (at most the one collection that runs as soon as the collector is back on)
    assert _collections_during(lambda: mgr.create_topic("wide", 5000)) <= 1
    assert gc.isenabled()
    mgr.close()
    loaded: list[LogManager] = []
    assert _collections_during(lambda: loaded.append(LogManager(tmp_path))) <= 1
    assert gc.isenabled() and loaded[0].get_log("wide", 4999).log_end_offset == 0
    loaded[0].close()
    # Without the pause, as many allocations set the collector off again and again.
    assert _collections_during(lambda: [[] for _ in range(50_000)]) > 10


def test_pauses_nest_across_threads_and_end_on_errors() -> None:
    inner_started, release = threading.Event(), threading.Event()

    def other() -> None:
        with gc_paused():
            inner_started.set()
            release.wait(10)

    with gc_paused():
        thread = threading.Thread(target=other)
        thread.start()
        assert inner_started.wait(10)
        assert not gc.isenabled()
    assert not gc.isenabled()  # the other thread's pause still holds
    release.set()
    thread.join(10)
    assert gc.isenabled()
    try:
        with gc_paused():
            raise ValueError("boom")
    except ValueError:
        pass
    assert gc.isenabled()
    gc.disable()  # a collector disabled by someone else stays disabled
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
