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
from typing import TYPE_CHECKING

from logserver.rest.errors import UNAUTHORIZED, RestError
from logserver.security.sasl import check_password
from logserver.security.session import ANONYMOUS

if TYPE_CHECKING:
    from logserver.broker import Broker


async def principal_of(broker: Broker, required: bool, authorization: str | None) -> str:
    """The principal a request runs as; 401 without valid credentials when required."""
    if not required:
        return ANONYMOUS
    user, password = _basic(authorization)
    credentials = broker.scram.mechanisms_of(user)
    if not await asyncio.to_thread(check_password, credentials, password):
        raise RestError(401, UNAUTHORIZED, "Authentication failed: invalid username or password")
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
