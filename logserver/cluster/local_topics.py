"""Which cluster topic each local log was created for, so that a broker can tell its
stray logs from live ones (Kafka's KRaft brokers compare the topic id of each local log
with the metadata image at start-up and delete the strays).

The broker's storage gives every local topic an id of its own, so the cluster's topic id
is kept beside it, in ``{data dir}/cluster-topic-ids`` (JSON): the etcd cluster's
incarnation (a random id created once under the prefix) and, per local topic, the
cluster's topic id it holds a replica of. It is written before the local log is created.
Decisions are pure (``classify``): a log whose topic is gone from the cluster, or exists
there under another id (deleted and created again while this broker was down), is stray;
one with no record is adopted if the cluster has the topic (data directories written
before this file existed) and otherwise kept. Nothing is deleted on the word of another
etcd (or prefix): the incarnation must be the one the records were written for.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

FILE_NAME = "cluster-topic-ids"
CHECKPOINT_FILE = "replication-offset-checkpoint"  # the followers' high watermarks (node.py)


def cluster_member_files(data_dir: Path) -> list[str]:
    """The files only a cluster member writes in its data directory (empty: none, so the
    directory is a single node's or has never been started)."""
    return [name for name in (FILE_NAME, CHECKPOINT_FILE) if (data_dir / name).exists()]


@dataclass
class Verdicts:
    """What to do with each local topic log (names only; internal topics never appear)."""

    gone: list[str] = field(default_factory=list)  # the cluster no longer has the topic
    replaced: list[str] = field(default_factory=list)  # the cluster's topic has another id
    adopt: dict[str, bytes] = field(default_factory=dict)  # no record yet: record this id
    unknown: list[str] = field(default_factory=list)  # no record, not in the cluster: kept


def classify(local: Iterable[str], cluster: Mapping[str, bytes],
             recorded: Mapping[str, bytes]) -> Verdicts:
    """``cluster``: topic name -> topic id as etcd has them; ``recorded``: as the file has
    them for the local logs."""
    out = Verdicts()
    for name in local:
        mine, theirs = recorded.get(name), cluster.get(name)
        if mine is None:
            if theirs is None:
                out.unknown.append(name)
            else:
                out.adopt[name] = theirs
        elif theirs is None:
            out.gone.append(name)
        elif theirs != mine:
            out.replaced.append(name)
    return out


class LocalTopicIds:
    """The file, read once and rewritten (atomically) on every change."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / FILE_NAME
        self.incarnation: str | None = None
        self.ids: dict[str, bytes] = {}
        try:
            raw = json.loads(self.path.read_text())
            self.incarnation = raw.get("incarnation")
            self.ids = {name: bytes.fromhex(tid) for name, tid in raw.get("topics", {}).items()}
        except FileNotFoundError:
            pass
        except (OSError, ValueError, AttributeError) as exc:  # unreadable: trust nothing
            log.warning("%s is unreadable (%s); no local log is deleted as stray", self.path, exc)
            self.incarnation = "unreadable"

    def bind(self, incarnation: str) -> bool:
        """True if the records are for this etcd cluster (first use: they are from now
        on); False means another cluster, so no record may decide a deletion."""
        if self.incarnation is None:
            self.incarnation = incarnation
            self._save()
            return True
        return self.incarnation == incarnation

    def remember(self, name: str, topic_id: bytes) -> None:
        self.remember_all({name: topic_id})

    def remember_all(self, ids: Mapping[str, bytes]) -> None:
        """One write for many (a data directory adopted at its first start)."""
        changed = {name: tid for name, tid in ids.items() if self.ids.get(name) != tid}
        if changed:
            self.ids.update(changed)
            self._save()

    def forget(self, name: str) -> None:
        if self.ids.pop(name, None) is not None:
            self._save()

    def _save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            json.dump({"incarnation": self.incarnation,
                       "topics": {n: tid.hex() for n, tid in sorted(self.ids.items())}}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
