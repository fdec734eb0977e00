"""HTTP basic authentication against the SCRAM users, when the broker authenticates.

When a listener uses SASL or ACLs are on, every request must name a SCRAM user and its
password (checked as SASL/PLAIN checks it: PBKDF2 against the stored keys, on a worker
thread); the request then runs as ``User:<name>``. Otherwise requests run as
``User:ANONYMOUS`` and the listener should stay on loopback (its default).
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

from logserver.rest.errors import UNAUTHORIZED, RestError
from logserver.security.sasl import check_password
from logserver.security.session import ANONYMOUS

if TYPE_CHECKING:
    from logserver.broker import Broker


VERIFIED_TTL_S = 60.0  # a verified password is taken again without PBKDF2 for this long
_VERIFIED_MAX = 10_000
_PEPPER = secrets.token_bytes(32)  # the cache holds keyed hashes, never passwords
_verified: dict[bytes, float] = {}


async def principal_of(broker: Broker, required: bool, authorization: str | None) -> str:
    """The principal a request runs as; 401 without valid credentials when required.

    A webhook sends the same credentials with every request: a password verified in the
    last minute against the same stored keys is not run through PBKDF2 again (a changed
    or deleted credential changes the stored keys, so the entry no longer matches)."""
    if not required:
        return ANONYMOUS
    user, password = _basic(authorization)
    credentials = broker.scram.mechanisms_of(user)
    stored = b"".join(m.encode() + c.stored_key for m, c in sorted(credentials.items()))
    entry = hmac.new(_PEPPER, b"\0".join((user.encode(), password.encode(), stored)),
                     hashlib.sha256).digest()
    now = time.monotonic()
    if credentials and _verified.get(entry, 0.0) > now:
        return f"User:{user}"
    if not await asyncio.to_thread(check_password, credentials, password):
        raise RestError(401, UNAUTHORIZED, "Authentication failed: invalid username or password")
    if len(_verified) >= _VERIFIED_MAX:
        _verified.clear()
    _verified[entry] = now + VERIFIED_TTL_S
    return f"User:{user}"


def _basic(authorization: str | None) -> tuple[str, str]:
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "basic" or not token:
        raise RestError(401, UNAUTHORIZED, "Authentication required (HTTP basic, a SCRAM user)")
    try:
        user, sep, password = base64.b64decode(token.strip(), validate=True).decode().partition(":")
    except (binascii.Error, ValueError):
        raise RestError(401, UNAUTHORIZED, "malformed basic credentials") from None
    if not sep or not user:
        raise RestError(401, UNAUTHORIZED, "malformed basic credentials")
    return user, password
