"""SCRAM credentials of the SASL users, kept in the data directory.

``<data>/__scram_credentials.json`` holds, per user and mechanism, the salt, iteration
count, StoredKey and ServerKey of RFC 5802 (base64), never a password. The file is
replaced atomically (tmp, fsync, rename, fsync directory) and readable by its owner only.
Written by AlterUserScramCredentials on the running server and by the offline
``logserver scram`` command (which takes the data directory's lock, so never both).
"""

from __future__ import annotations

import base64
import json
import logging
import threading
from pathlib import Path

from logserver.log.fsutil import atomic_write
from logserver.security.scram import MECHANISMS, ScramCredential

__all__ = ["CREDENTIALS_FILE", "CredentialStore"]

log = logging.getLogger(__name__)

CREDENTIALS_FILE = "__scram_credentials.json"
FORMAT_VERSION = 1


class CredentialStore:
    """User -> mechanism -> :class:`ScramCredential`, persisted on every change."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / CREDENTIALS_FILE
        self._users: dict[str, dict[str, ScramCredential]] = {}
        self._write_lock = threading.Lock()  # writes from worker threads, one at a time
        self._generation = 0  # changes made so far
        self._written = 0  # the generation on disk

    def load(self) -> CredentialStore:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return self
        except OSError as exc:
            raise ValueError(f"{self.path}: unreadable SCRAM credentials ({exc})") from exc
        self.replace_all(raw, str(self.path))
        return self

    def replace_all(self, raw: bytes, where: str = "credentials") -> None:
        """Every user from a document :meth:`snapshot` serialized (the file's content, or
        the cluster-wide credentials in etcd), replacing those held so far."""
        try:
            document = json.loads(raw)
        except ValueError as exc:
            raise ValueError(f"{where}: unreadable SCRAM credentials ({exc})") from exc
        if document.get("version") != FORMAT_VERSION:
            raise ValueError(f"{where}: unknown format version {document.get('version')!r}")
        users: dict[str, dict[str, ScramCredential]] = {}
        for user, mechanisms in document.get("users", {}).items():
            for mechanism, fields in mechanisms.items():
                if mechanism not in MECHANISMS:
                    continue
                users.setdefault(user, {})[mechanism] = ScramCredential(
                    salt=base64.b64decode(fields["salt"]),
                    stored_key=base64.b64decode(fields["stored_key"]),
                    server_key=base64.b64decode(fields["server_key"]),
                    iterations=int(fields["iterations"]))
        self._users = users
        self._generation += 1

    # -- reading ---------------------------------------------------------------------------

    def lookup(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._users.get(user, {}).get(mechanism)

    def mechanisms_of(self, user: str) -> dict[str, ScramCredential]:
        return dict(self._users.get(user, {}))

    def users(self) -> list[str]:
        return sorted(self._users)

    # -- changing (in memory at once; save() makes it durable) ------------------------------

    def upsert(self, user: str, mechanism: str, credential: ScramCredential) -> None:
        self._users.setdefault(user, {})[mechanism] = credential
        self._generation += 1

    def delete(self, user: str, mechanism: str) -> bool:
        mechanisms = self._users.get(user)
        if mechanisms is None or mechanisms.pop(mechanism, None) is None:
            return False
        if not mechanisms:
            del self._users[user]
        self._generation += 1
        return True

    def snapshot(self) -> tuple[int, bytes]:
        """The current state, serialized, with its generation (for :meth:`save`)."""
        return self._generation, self._serialize()

    def _serialize(self) -> bytes:
        users = {
            user: {mechanism: {"salt": _b64(c.salt), "stored_key": _b64(c.stored_key),
                               "server_key": _b64(c.server_key), "iterations": c.iterations}
                   for mechanism, c in sorted(mechanisms.items())}
            for user, mechanisms in sorted(self._users.items())}
        return json.dumps({"version": FORMAT_VERSION, "users": users}, indent=1).encode()

    def save(self, snapshot: tuple[int, bytes] | None = None) -> None:
        """Write ``snapshot`` (default: now) atomically, owner-only; blocking (fsync), so the
        server calls it on a worker thread with a snapshot taken on the event loop. A
        snapshot older than the one already written is skipped (threads may race)."""
        generation, data = self.snapshot() if snapshot is None else snapshot
        with self._write_lock:
            if generation < self._written:
                return
            atomic_write(self.path, data, mode=0o600)
            self._written = generation


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()
