"""A simulated power loss, judged by what the server process really made durable.

The server runs with ``fsync_shim.c`` preloaded (compiled here with gcc), which journals
every fsync (with the file's size at that moment), every file and directory creation and
every rename, from libc, outside the server's own code. After a kill -9 (which keeps the
page cache) :meth:`Disk.power_loss` takes away what a machine crash may take:

- every file is cut at a random point between the size its last fsync covered (or its
  size at the last checkpoint) and its current size;
- a file or directory created since the checkpoint whose directory was not fsynced
  after the creation vanishes; such a rename is undone.

A checkpoint (``os.sync()`` with the server stopped) is the known-durable starting point.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

SHIM_SOURCE = Path(__file__).with_name("fsync_shim.c")


def build_shim(workdir: Path) -> Path:
    """Compile the LD_PRELOAD shim (gcc, from Debian's ``gcc``) into ``workdir``."""
    gcc = shutil.which("gcc") or shutil.which("cc")
    assert gcc, "the power-loss tests need gcc (bash tests/run.sh installs it)"
    out = workdir / "fsync_shim.so"
    subprocess.run([gcc, "-O2", "-shared", "-fPIC", "-Wall", "-Werror", "-o", str(out),
                    str(SHIM_SOURCE), "-ldl"], check=True, capture_output=True, timeout=120)
    return out


@dataclass(frozen=True)
class Event:
    kind: str  # S file fsync, D directory fsync, C file created, M directory created, R rename
    # (c, m, r: the same journaled before the call, which a kill -9 may follow at once)
    seq: int
    tid: int
    start_ns: int
    end_ns: int
    ino: int
    size: int
    path: str
    target: str = ""  # R: the new name (``path`` is the old one)


def read_events(journal: Path) -> list[Event]:
    events = []
    for line in journal.read_text(errors="replace").splitlines():
        kind, seq, tid, t0, t1, ino, size, rest = line.split(" ", 7)
        path, _, target = rest.partition("\t")
        events.append(Event(kind, int(seq), int(tid), int(t0), int(t1), int(ino), int(size),
                            path, target))
    return sorted(events, key=lambda e: e.seq)


@dataclass
class Loss:
    """What one simulated power loss took away."""

    bytes_cut: int = 0
    files_cut: int = 0
    entries_lost: list[str] = field(default_factory=list)
    renames_undone: list[str] = field(default_factory=list)
    longest_fsync_round_ms: float = 0.0  # fsyncs one thread issued back to back
    #: Every file the loss did not remove -> the bytes of it that were durable before the
    #: cut (its last completed fsync, or the checkpoint): data in them must survive.
    durable: dict[str, int] = field(default_factory=dict)
    file_fsyncs: int = 0  # completed fsyncs of regular files the shim journaled


class Disk:
    """A data directory under a server started with :meth:`environment`."""

    def __init__(self, data_dir: Path, workdir: Path) -> None:
        self.data_dir = Path(os.path.realpath(data_dir))
        self.journal = workdir / "fsync-shim.journal"
        self.shim = build_shim(workdir)
        self.baseline: dict[str, tuple[int, int]] = {}  # path -> (inode, size)

    def environment(self) -> dict[str, str]:
        """The server's extra environment: the shim preloaded, journaling here."""
        return {"LD_PRELOAD": str(self.shim), "FSYNC_SHIM_LOG": str(self.journal)}

    def checkpoint(self) -> None:
        """With the server stopped: everything on disk now is durable."""
        os.sync()
        self.baseline = {str(p): (p.stat().st_ino, p.stat().st_size)
                         for p in self._entries() if p.is_file()}
        self.baseline.update({str(p): (p.stat().st_ino, -1) for p in self._entries() if p.is_dir()})
        self.journal.write_bytes(b"")

    def _entries(self) -> list[Path]:
        return sorted(self.data_dir.rglob("*"))

    def power_loss(self, rng: random.Random) -> Loss:
        """With the server killed: lose what was not durable (see the module docstring)."""
        events = read_events(self.journal) if self.journal.exists() else []
        loss = Loss(longest_fsync_round_ms=_longest_round_ms(events))
        self._lose_entries(events, loss)
        last_sync: dict[int, int] = {}
        for event in events:
            if event.kind == "S":
                last_sync[event.ino] = event.size  # the last fsync wins (a file may shrink)
                loss.file_fsyncs += 1
        for path in self._entries():
            if not path.is_file() or path.is_symlink():
                continue
            st = path.stat()
            known = self.baseline.get(str(path))
            durable = last_sync.get(st.st_ino, known[1] if known and known[0] == st.st_ino else 0)
            loss.durable[str(path)] = min(durable, st.st_size)
            if st.st_size > durable:
                keep = rng.randint(durable, st.st_size)
                if keep < st.st_size:
                    os.truncate(path, keep)
                    loss.bytes_cut += st.st_size - keep
                    loss.files_cut += 1
        return loss

    def _lose_entries(self, events: list[Event], loss: Loss) -> None:
        created: dict[str, Event] = {}
        pending: dict[int, Event] = {}  # tid -> a creation it began and did not journal done
        for event in events:
            if event.kind in "cmr":
                pending[event.tid] = event
                continue
            if event.kind in "CMR":
                pending.pop(event.tid, None)
            if event.kind in "CM":
                created[event.path] = event
            elif event.kind == "R":
                created.pop(event.path, None)
                created[event.target] = event
        # The kill came between such a call and its journal line: it may have happened.
        for event in pending.values():
            done = Event(event.kind.upper(), event.seq, event.tid, 0, 0, 0, 0,
                         _real(event.path), _real(event.target) if event.target else "")
            created.setdefault(done.target if done.kind == "R" else done.path, done)
        dir_syncs: dict[str, list[int]] = {}
        for event in events:
            if event.kind == "D":
                dir_syncs.setdefault(event.path, []).append(event.seq)
        gone: list[Path] = []
        for path in self._entries():  # parents before children
            if any(parent in path.parents for parent in gone):
                continue
            known = self.baseline.get(str(path))
            if known is not None and known[0] == path.stat().st_ino:
                continue  # there at the checkpoint
            creation = created.get(str(path))
            assert creation is not None, (
                f"{path} appeared since the checkpoint, but the shim saw no creation of it")
            if any(seq > creation.seq for seq in dir_syncs.get(str(path.parent), ())):
                continue  # its directory was fsynced after it was created: durable
            if creation.kind == "R":
                if known is not None:
                    continue  # replaced a file: keeping the new one is a legal outcome
                source = Path(creation.path)
                if not source.exists() and source.parent.is_dir():
                    os.rename(path, source)
                    loss.renames_undone.append(f"{source.name} <- {path.name}")
                    continue
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink()
            gone.append(path)
            loss.entries_lost.append(str(path.relative_to(self.data_dir)))


def _real(path: str) -> str:
    """``path`` with its directory's symlinks resolved, as the shim's fd paths are."""
    head, tail = os.path.split(path)
    return os.path.join(os.path.realpath(head), tail)


def _longest_round_ms(events: list[Event]) -> float:
    """The longest run of fsyncs one thread issued back to back (within 1 ms of each other)."""
    longest = 0
    by_thread: dict[int, tuple[int, int]] = {}  # tid -> (round start, last end)
    for event in sorted((e for e in events if e.kind in "SD"), key=lambda e: e.start_ns):
        start, end = by_thread.get(event.tid, (event.start_ns, event.end_ns))
        if event.start_ns - end > 1_000_000:
            start = event.start_ns
        end = max(end, event.end_ns)
        by_thread[event.tid] = (start, end)
        longest = max(longest, end - start)
    return longest / 1e6
