"""Crash safety, measured: kill -9 at random moments under an idempotent acks=all
producer, restart, and check every acknowledged record (see tests/helpers/faults/crashloop.py).

CI runs a few cycles of each mode (``CRASH_CYCLES`` changes the fsync-every-append count;
the long forms, 1000+ cycles of any mode, are ``python -m benchmarks.crash_loop``,
docs/testing.md), and each mode once more with a simulated power loss, so the manual's
per-mode guarantee (docs/configuration.md, Durability) is what is checked. The power loss
does not trust the server: an LD_PRELOAD shim records the fsyncs it really made
(tests/helpers/faults/powerloss.py), every file is cut at a random point after what they covered,
and creations whose directory was not fsynced vanish. Loss is judged by those bytes, not
by the clock (an acknowledged record may be lost only if no completed fsync covered it),
so the tests hold on a loaded machine and run beside others. The figures are printed
(``pytest -s``) and attached to the test report.
"""

from __future__ import annotations

import os

import pytest
from helpers.faults import crashloop

# alone: under four workers' load a restart after a simulated power loss once exited 1
# with no output (cause not found; 4 copies side by side passed): run with nothing beside.
pytestmark = [pytest.mark.slow, pytest.mark.alone, pytest.mark.timeout(600)]  # a hang guard: a loaded machine (load 20) took 180 s for 8 cycles

#: Cycles of the kill -9 fsync-every-append test (about 3 s each: a server start).
CYCLES = int(os.environ.get("CRASH_CYCLES", "8"))
#: Cycles of every other test: each cycle checks everything, the count only adds chances.
FEW = 3


def _check(report: crashloop.CrashReport, cycles: int, record_property) -> None:
    record_property("crash_figures", report.summary())
    assert not report.failures, report.failures
    assert report.cycles == cycles, report.summary()
    assert report.acked > 0, report.summary()


def test_kill9_fsync_every_append(tmp_path, record_property):
    report = crashloop.run(tmp_path, "fsync-every-append", CYCLES)
    _check(report, CYCLES, record_property)
    assert report.lost == 0


@pytest.mark.parametrize("mode", ["fsync-interval", "ack-after-write"])
def test_kill9_other_modes_lose_nothing(tmp_path, record_property, mode):
    """A process crash keeps the page cache, so no mode may lose an acknowledged record."""
    report = crashloop.run(tmp_path, mode, FEW)
    _check(report, FEW, record_property)
    assert report.lost == 0


#: Every append handed to the writer thread (log.writer.thread.min.bytes=0).
WRITER_THREAD = {"log.writer.thread.min.bytes": 0}


@pytest.mark.parametrize("mode", ["fsync-every-append", "ack-after-write"])
def test_kill9_with_writer_thread_loses_nothing(tmp_path, record_property, mode):
    """Offsets assigned on the loop, bytes written on the writer thread: a kill -9 at any
    moment still leaves every acknowledged record where it was acknowledged."""
    report = crashloop.run(tmp_path, mode, FEW, extra_settings=WRITER_THREAD)
    _check(report, FEW, record_property)
    assert report.lost == 0


def test_power_loss_with_writer_thread_keeps_fsync_every_append(tmp_path, record_property):
    """The fsync an acknowledgement waits for covers the write the writer thread made."""
    report = crashloop.run(tmp_path, "fsync-every-append", FEW, power_loss=True,
                           extra_settings=WRITER_THREAD)
    _check(report, FEW, record_property)
    # Unsynced bytes or unsynced creations/renames: with fsync-every-append a kill may land
    # when every byte is synced, and the cut then takes only directory entries away.
    assert report.bytes_cut + report.entries_lost > 0, "the simulated power loss took nothing away"
    assert report.lost == 0  # and each record was fsynced before acknowledged (crashloop)


@pytest.mark.parametrize("mode", list(crashloop.MODES))
def test_simulated_power_loss_keeps_the_stated_guarantee(tmp_path, record_property, mode):
    """Cut unsynced bytes after each kill: fsync-every-append loses nothing (every record
    fsynced before its acknowledgement), fsync-interval only records no completed fsync
    covered yet (and its timer did make acknowledged records durable), ack-after-write
    whatever was not written back; in every mode what an fsync covered survives (checked
    per record by ``crashloop.loss_allowed`` against the shim's journal, not the clock)."""
    report = crashloop.run(tmp_path, mode, FEW + 1, power_loss=True)
    _check(report, FEW + 1, record_property)
    # Unsynced bytes or unsynced creations/renames: with fsync-every-append a kill may land
    # when every byte is synced, and the cut then takes only directory entries away.
    assert report.bytes_cut + report.entries_lost > 0, "the simulated power loss took nothing away"
    if mode == "fsync-every-append":  # each record fsynced before acknowledged (crashloop)
        assert report.lost == 0
    elif mode == "fsync-interval":
        # the interval's fsyncs happened and covered acknowledged records; what they had
        # not covered yet is the only loss crashloop allowed
        assert report.acked_fsynced > 0, report.summary()
    else:  # nothing is fsynced while it runs: the loss must show, or the simulation is idle
        assert report.lost > 0, report.summary()
