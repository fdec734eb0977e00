"""Raw baselines measured in the same run as the workloads.

A broker's produce path is at best a socket read plus a file append, and its fetch path
at best a socket write, so these are the ceilings the workload figures are divided by.
They are measured on the same machine within the same minute because shared machines
drift: a ratio survives that noise far better than an absolute MB/s.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .progress import NULL_PROGRESS, Progress

log = logging.getLogger(__name__)

CHUNK = 1 << 20  # 1 MiB per write: large enough that per-call overhead vanishes
MB = 1_000_000  # MB/s throughout is 10^6 bytes per second


@dataclass
class BaselineResult:
    """One raw bandwidth figure."""

    name: str
    bytes: int
    seconds: float
    mb_per_s: float
    detail: str
    #: MB/s of every repetition; ``mb_per_s`` is their median, ``low``/``high`` the range.
    samples: list[float] = field(default_factory=list)
    low: float = 0.0
    high: float = 0.0

    def to_json(self) -> dict[str, object]:
        """The JSON form written to the result file."""
        return asdict(self)


def _result(name: str, nbytes: int, seconds: float, detail: str) -> BaselineResult:
    rate = round(nbytes / seconds / MB if seconds > 0 else 0.0, 1)
    return BaselineResult(name, nbytes, round(seconds, 4), rate, detail, [rate], rate, rate)


def loopback_tcp(
    duration: float = 1.5,
    max_bytes: int = 64 << 30,
    progress: Progress = NULL_PROGRESS,
    source: Path | None = None,
) -> BaselineResult:
    """Bytes/s from a sender thread to a receiver over 127.0.0.1 with 1 MiB writes.

    Both ends use default socket buffer sizes, as a client and the broker would. The
    sending loop runs in a thread: both sides spend their time inside system calls,
    which release the GIL. With ``source`` (a file already in the page cache) the
    sender uses ``os.sendfile`` from it, round and round: the best a broker's fetch
    path can do, since a log larger than the CPU caches is copied from page-cache pages,
    not from one hot 1 MiB buffer.
    """
    name = "loopback-tcp" if source is None else "sendfile-loopback"
    src_fd = -1 if source is None else os.open(source, os.O_RDONLY)
    src_size = 0 if source is None else os.fstat(src_fd).st_size
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(10)
    port = listener.getsockname()[1]
    stop = threading.Event()
    sender_error: list[BaseException] = []

    def send() -> None:
        payload = os.urandom(CHUNK)
        sent = 0
        try:
            with socket.create_connection(("127.0.0.1", port)) as out:
                out.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if src_fd >= 0:
                    out_fd, position = out.fileno(), 0
                    while not stop.is_set() and sent < max_bytes:
                        n = os.sendfile(out_fd, src_fd, position, CHUNK)
                        position = position + n if position + n < src_size else 0
                        sent += n
                while src_fd < 0 and not stop.is_set() and sent < max_bytes:
                    out.sendall(payload)
                    sent += CHUNK
        except OSError as exc:  # the receiver closing first ends the run early
            if not stop.is_set():
                sender_error.append(exc)

    sender = threading.Thread(target=send, name="loopback-sender", daemon=True)
    sender.start()
    conn, _ = listener.accept()
    listener.close()
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    received = 0
    progress.start(f"baseline {name}", 0, unit="bytes")
    start = time.perf_counter()
    deadline = start + duration
    with conn:
        while True:
            n = conn.recv_into(view)
            if n == 0:
                break
            received += n
            progress.update(received)
            if time.perf_counter() >= deadline:
                stop.set()
                break
        elapsed = time.perf_counter() - start
        stop.set()
    sender.join(timeout=5)
    if src_fd >= 0:
        os.close(src_fd)
    if sender_error:
        raise sender_error[0]
    how = "1 MiB writes" if source is None else f"os.sendfile of a {src_size >> 20} MiB cached file"
    result = _result(name, received, elapsed, f"{how}, 1 connection, {duration:g}s cap")
    progress.finish(f"{result.mb_per_s:,.1f} MB/s")
    return result


def file_append(
    directory: Path,
    fsync: bool,
    duration: float = 1.5,
    max_bytes: int = 1 << 40,
    progress: Progress = NULL_PROGRESS,
    keep_file: bool = False,
) -> BaselineResult:
    """Bytes/s appending 1 MiB chunks with ``os.write`` to a new file in ``directory``.

    With ``fsync`` the clock includes one final ``os.fsync``: that is what an
    fsync-on-close or interval durability setting pays at best. Without it the figure is
    page-cache bandwidth, the ceiling for ack-after-write. ``keep_file`` leaves the file
    (and its page cache) in place, as a log keeps its segments: deleting it would hand
    the next run warm, already-allocated pages that a growing log never gets.
    """
    name = "file-append+fsync" if fsync else "file-append"
    fd, tmp = tempfile.mkstemp(prefix=f"baseline-{name}-", suffix=".bin", dir=directory)
    os.close(fd)
    path = Path(tmp)
    payload = os.urandom(CHUNK)
    written = 0
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    progress.start(f"baseline {name}", max_bytes, unit="bytes")
    try:
        start = time.perf_counter()
        deadline = start + duration
        while written < max_bytes:
            written += os.write(fd, payload)
            progress.update(written)
            if time.perf_counter() >= deadline:
                break
        if fsync:
            os.fsync(fd)
        elapsed = time.perf_counter() - start
    finally:
        os.close(fd)
        if not keep_file:
            path.unlink(missing_ok=True)
    detail = f"1 MiB os.write to a new file for {duration:g}s{', then one fsync' if fsync else ''}"
    result = _result(name, written, elapsed, detail)
    progress.finish(f"{result.mb_per_s:,.1f} MB/s")
    return result


def repeated(repeats: int, measure: Callable[[], BaselineResult]) -> BaselineResult:
    """The median of ``repeats`` runs, with their range; each run's MB/s in ``samples``."""
    runs = [measure() for _ in range(max(1, repeats))]
    rates = [r.mb_per_s for r in runs]
    median = round(statistics.median(rates), 1)
    detail = runs[0].detail + f", median of {len(runs)} runs"
    return BaselineResult(runs[0].name, sum(r.bytes for r in runs),
                          round(sum(r.seconds for r in runs), 4), median, detail, rates,
                          min(rates), max(rates))


def measure_all(
    directory: Path, duration: float, repeats: int = 3, progress: Progress = NULL_PROGRESS
) -> list[BaselineResult]:
    """Every raw baseline, in a fixed order, each the median of ``repeats`` runs.

    Page-cache bandwidth on these VMs swings 2-6x from one second to the next (first
    touch of memory the host reclaimed versus pages just freed, then dirty-page
    throttling after a few GB), so one short sample would make the ratios depend on luck
    and on run order. Each append run writes a new file for the whole duration, as a
    log does, and deletes it afterwards (5 s at page-cache speed is many GB).
    """
    files = directory / "baseline-files"
    files.mkdir(exist_ok=True)

    def append(fsync: bool) -> BaselineResult:
        return file_append(files, fsync, duration, progress=progress)

    cached = files / "sendfile-source.bin"
    with open(cached, "wb") as f:  # 256 MiB: larger than any CPU cache, warm in page cache
        block = os.urandom(CHUNK)
        for _ in range(256):
            f.write(block)

    try:
        results = [
            repeated(repeats, lambda: loopback_tcp(duration, progress=progress)),
            repeated(
                repeats, lambda: loopback_tcp(duration, progress=progress, source=cached)
            ),
            repeated(repeats, lambda: append(False)),
            repeated(repeats, lambda: append(True)),
        ]
    finally:
        shutil.rmtree(files, ignore_errors=True)
    for r in results:
        log.debug("baseline %s: %s MB/s (samples %s)", r.name, r.mb_per_s, r.samples)
    return results
