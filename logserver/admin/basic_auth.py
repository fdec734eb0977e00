"""HTTP basic authentication of the admin API against the Kafka listener's SCRAM users.

Off unless ``admin.require.auth`` is true (Redpanda's ``admin_api_require_auth``); the
check itself is logserver/security/http_basic.py. Liveness and readiness stay open for
probes.
"""

from __future__ import annotations

from aiohttp import web

from commonlib.host_check import Handler
from logserver.admin.state import AdminState
from logserver.security import http_basic

OPEN_PATHS = frozenset({"/v1/status/live", "/v1/status/ready"})
REALM = 'Basic realm="logserver admin", charset="UTF-8"'


class BasicAuth:
    def __init__(self, state: AdminState, required: bool) -> None:
        self.state = state
        self.required = required

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
        given = http_basic.parse_basic(request.headers.get("Authorization"))
        if given is None:
            return self._unauthorized("authentication required (HTTP basic, a SCRAM user)")
        user, password = given
        if not await http_basic.verify(broker, user, password, request.remote or "?", "ADMIN"):
            return self._unauthorized("authentication failed")
        request["principal"] = f"User:{user}"
        return await handler(request)
