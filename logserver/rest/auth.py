"""HTTP basic authentication of the REST proxy against the SCRAM users.

When a listener uses SASL or ACLs are on, every request must name a SCRAM user and its
password (logserver/security/http_basic.py); the request then runs as ``User:<name>``.
Otherwise requests run as ``User:ANONYMOUS`` and the listener should stay on loopback
(its default).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from logserver.rest.errors import UNAUTHORIZED, RestError
from logserver.security import http_basic
from logserver.security.session import ANONYMOUS

if TYPE_CHECKING:
    from logserver.services import BrokerServices

LISTENER = "REST"


async def principal_of(broker: BrokerServices, required: bool, authorization: str | None,
                       source: str = "?") -> str:
    """The principal a request runs as; 401 without valid credentials when required."""
    if not required:
        return ANONYMOUS
    given = http_basic.parse_basic(authorization)
    if given is None:
        raise RestError(401, UNAUTHORIZED, "Authentication required (HTTP basic, a SCRAM user)")
    user, password = given
    if not await http_basic.verify(broker, user, password, source, LISTENER):
        raise RestError(401, UNAUTHORIZED, "Authentication failed: invalid username or password")
    return f"User:{user}"
