"""Username/password checks against a credentials file (mosquitto_passwd-like, our own format).

One ``user:secret`` per line; ``secret`` is either plain text or
``$pbkdf2-sha256$ITERATIONS$SALT_HEX$HASH_HEX`` (``mqtt-bridge --hash-password`` prints
such a line). Blank lines and ``#`` comments are skipped.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)
_PREFIX = "$pbkdf2-sha256$"


def hash_password(password: str, iterations: int = 100_000) -> str:
    salt = os.urandom(16)
    digest = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    return f"{_PREFIX}{iterations}${salt.hex()}${digest.hex()}"


class Credentials:
    """Loaded credentials; ``check`` is constant-time per entry."""

    def __init__(self, entries: dict[str, str]) -> None:
        self.entries = entries

    @classmethod
    def load(cls, path: str | Path) -> Credentials:
        entries: dict[str, str] = {}
        for n, line in enumerate(Path(path).read_text().splitlines(), 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            user, sep, secret = line.partition(":")
            if not sep or not user:
                raise ValueError(f"{path}:{n}: expected user:password")
            entries[user] = secret
        log.info("loaded %d credentials from %s", len(entries), path)
        return cls(entries)

    def check(self, username: str | None, password: bytes | None) -> bool:
        if username is None or password is None:
            return False
        secret = self.entries.get(username)
        if secret is None:
            return False
        if secret.startswith(_PREFIX):
            try:
                iterations, salt, want = secret[len(_PREFIX) :].split("$")
                got = hashlib.pbkdf2_hmac("sha256", password, bytes.fromhex(salt), int(iterations))
                return hmac.compare_digest(got.hex(), want)
            except ValueError:
                log.error("malformed hashed secret for user %r", username)
                return False
        return hmac.compare_digest(secret.encode(), password)
