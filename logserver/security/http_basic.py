"""HTTP basic credentials checked against the SCRAM users (the admin API, the REST proxy).

The password is checked as SASL/PLAIN checks it: PBKDF2 against the stored keys, on a
worker thread, unknown users costing the same. A webhook or a dashboard sends the same
credentials with every request, so a password verified in the last minute against the
same stored keys is not run through PBKDF2 again (a changed or deleted credential changes
the stored keys, so the entry no longer matches; entries are keyed hashes, never
passwords). Failures count against the address like failed SASL logins.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import secrets
import time
from typing import TYPE_CHECKING

from logserver.security.sasl import check_password

if TYPE_CHECKING:
    from logserver.services import BrokerServices

VERIFIED_TTL_S = 60.0
_VERIFIED_MAX = 10_000
_PEPPER = secrets.token_bytes(32)
_verified: dict[bytes, float] = {}


def parse_basic(authorization: str | None) -> tuple[str, str] | None:
    """(user, password) of an ``Authorization: Basic`` header; None if absent or malformed."""
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "basic" or not token:
        return None
    try:
        user, sep, password = base64.b64decode(token.strip(), validate=True).decode().partition(":")
    except (binascii.Error, ValueError):
        return None
    return (user, password) if sep and user else None


async def verify(broker: BrokerServices, user: str, password: str, source: str, listener: str) -> bool:
    """Is ``password`` the SCRAM user's? Slowed and counted per address on failure."""
    credentials = broker.scram.mechanisms_of(user)
    stored = b"".join(m.encode() + c.stored_key for m, c in sorted(credentials.items()))
    entry = hmac.new(_PEPPER, b"\0".join((user.encode(), password.encode(), stored)),
                     hashlib.sha256).digest()
    now = time.monotonic()
    if credentials and _verified.get(entry, 0.0) > now:
        return True
    wait = broker.login_backoff.wait(source, now)
    if wait > 0:
        await asyncio.sleep(wait)
    if not await asyncio.to_thread(check_password, credentials, password):
        broker.login_backoff.failed(source, time.monotonic())
        broker.sasl_failures[listener] += 1
        return False
    broker.login_backoff.succeeded(source)
    if len(_verified) >= _VERIFIED_MAX:
        _verified.clear()
    _verified[entry] = time.monotonic() + VERIFIED_TTL_S
    return True
