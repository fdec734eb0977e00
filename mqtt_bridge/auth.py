"""Username/password checks against a password file that ``mosquitto_passwd`` can write.

One ``user:secret`` per line; blank lines and ``#`` comments are skipped. ``secret`` is
- ``$7$ITERATIONS$SALT_B64$HASH_B64``: PBKDF2-HMAC-SHA512 (mosquitto 2.x, and what
  ``mqtt-bridge --hash-password`` prints),
- ``$6$SALT_B64$HASH_B64``: SHA-512 of password + salt (mosquitto 1.x),
- ``$pbkdf2-sha256$ITERATIONS$SALT_HEX$HASH_HEX``: this bridge's earlier format,
- anything else: the password in plain text.

``check`` costs the same for an unknown user as for a known one (it hashes against a
dummy entry), so timing does not tell whether a user exists; it is CPU work and belongs
in a thread (``Bridge`` runs it there).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)

PBKDF2_SHA512 = "$7$"
SHA512 = "$6$"
PBKDF2_SHA256 = "$pbkdf2-sha256$"
#: mosquitto_passwd's defaults (salt bytes, iterations): many connects per second stay cheap.
SALT_BYTES = 12
ITERATIONS = 101


def hash_password(password: str, iterations: int = ITERATIONS) -> str:
    """A ``$7$`` secret, as ``mosquitto_passwd`` writes it."""
    salt = os.urandom(SALT_BYTES)
    digest = hashlib.pbkdf2_hmac("sha512", password.encode(), salt, iterations)
    return f"{PBKDF2_SHA512}{iterations}${_b64(salt)}${_b64(digest)}"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def verify(secret: str, password: bytes) -> bool:
    """Does ``password`` match the stored ``secret``? Raises ValueError if it is malformed."""
    try:
        if secret.startswith(PBKDF2_SHA512):
            iterations, salt, want = secret[len(PBKDF2_SHA512):].split("$")
            got = hashlib.pbkdf2_hmac("sha512", password, base64.b64decode(salt, validate=True),
                                      int(iterations))
            return hmac.compare_digest(got, base64.b64decode(want, validate=True))
        if secret.startswith(SHA512):
            salt, want = secret[len(SHA512):].split("$")
            got = hashlib.sha512(password + base64.b64decode(salt, validate=True)).digest()
            return hmac.compare_digest(got, base64.b64decode(want, validate=True))
        if secret.startswith(PBKDF2_SHA256):
            iterations, salt, want = secret[len(PBKDF2_SHA256):].split("$")
            got = hashlib.pbkdf2_hmac("sha256", password, bytes.fromhex(salt), int(iterations))
            return hmac.compare_digest(got, bytes.fromhex(want))
    except binascii.Error as exc:
        raise ValueError(str(exc)) from None
    return hmac.compare_digest(secret.encode(), password)


class Credentials:
    """A loaded password file."""

    def __init__(self, entries: dict[str, str]) -> None:
        self.entries = entries
        # Unknown users are checked against this, with the file's usual cost.
        hashed = [s for s in entries.values() if s.startswith(PBKDF2_SHA512)]
        iterations = int(hashed[0][len(PBKDF2_SHA512):].split("$")[0]) if hashed else ITERATIONS
        self.dummy = hash_password(os.urandom(8).hex(), iterations)

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
        if username is None:
            return False
        secret = self.entries.get(username)
        pw = password if password is not None else b""
        try:
            ok = verify(secret if secret is not None else self.dummy, pw)
        except ValueError:
            log.error("malformed secret for user %r in the password file", username)
            return False
        return ok and secret is not None and password is not None
