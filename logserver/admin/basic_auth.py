"""HTTP basic authentication of the admin API against the Kafka listener's SCRAM users.

Off unless ``admin.require.auth`` is true (Redpanda's ``admin_api_require_auth``). The
password is checked as a SASL/PLAIN one is: PBKDF2 against the stored SCRAM credentials,
on a worker thread, unknown users costing the same; failures count against the address
like failed SASL logins (``connection.failed.authentication.delay.*``). A check that passed
is remembered for a minute (by a hash of the credentials), so a dashboard polling every
second does not run PBKDF2 each time. Liveness and readiness stay open for probes.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import time

from aiohttp import web

from logserver.admin.host_check import Handler
from logserver.admin.state import AdminState
from logserver.security.sasl import check_password

OPEN_PATHS = frozenset({"/v1/status/live", "/v1/status/ready"})
REMEMBER_S = 60.0
REALM = 'Basic realm="logserver admin", charset="UTF-8"'


def _credentials(header: str | None) -> tuple[str, str] | None:
    if not header or header[:6].lower() != "basic ":
        return None
    try:
        user, sep, password = base64.b64decode(header[6:].strip(), validate=True).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return None
    return (user, password) if sep and user else None


class BasicAuth:
    def __init__(self, state: AdminState, required: bool) -> None:
        self.state = state
        self.required = required
        self._passed: dict[bytes, float] = {}  # sha256(user, password) -> until

    def _unauthorized(self, message: str) -> web.Response:
        return web.json_response({"error": message}, status=401,
                                 headers={"WWW-Authenticate": REALM})

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if not self.required or request.path in OPEN_PATHS:
            return await handler(request)
        broker = self.state.broker
        if broker is None:
            return web.json_response({"error": "recovering the data directory"}, status=503)
        given = _credentials(request.headers.get("Authorization"))
        if given is None:
            return self._unauthorized("authentication required (HTTP basic, a SCRAM user)")
        user, password = given
        key = hashlib.sha256(f"{user}\0{password}".encode()).digest()
        now = time.monotonic()
        if self._passed.get(key, 0.0) > now:
            return await handler(request)
        source = request.remote or "?"
        wait = broker.login_backoff.wait(source, now)
        if wait > 0:
            await asyncio.sleep(wait)
        ok = await asyncio.to_thread(check_password, broker.scram.mechanisms_of(user), password)
        if not ok:
            broker.login_backoff.failed(source, time.monotonic())
            broker.sasl_failures["ADMIN"] += 1
            return self._unauthorized("authentication failed")
        broker.login_backoff.succeeded(source)
        if len(self._passed) > 1024:
            self._passed.clear()
        self._passed[key] = now + REMEMBER_S
        request["principal"] = f"User:{user}"
        return await handler(request)
