"""One connection's security state, sans-I/O: who the client is and what it may send.

On PLAINTEXT and SSL listeners a connection is authenticated from the start (as
``User:ANONYMOUS``, or on SSL as the subject of a verified client certificate). On SASL
listeners it is not until a SaslHandshake and SaslAuthenticate exchange succeeds; until
then only ApiVersions, SaslHandshake and SaslAuthenticate are served and frames are capped
at ``sasl.server.max.receive.size`` (512 KiB, Kafka's limit for unauthenticated clients).
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import TYPE_CHECKING

from kafkaproto import ApiKey, RequestHeader
from logserver.security.sasl import Credentials, SaslAuthenticator

if TYPE_CHECKING:
    from logserver.security.listeners import ListenerSecurity

__all__ = ["ANONYMOUS", "RAW_TOKEN", "ConnectionSecurity", "current_security"]

ANONYMOUS = "User:ANONYMOUS"
# The "header" of a response that is a bare SASL token (after a v0 SaslHandshake).
RAW_TOKEN = RequestHeader(-1, 0, 0, None)
PRE_AUTH_APIS = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})


class ConnectionSecurity:
    """Security of one connection; the dispatcher consults it for every request."""

    def __init__(self, listener: ListenerSecurity, certificate_dn: str | None = None) -> None:
        self.listener = listener
        self.certificate_dn = certificate_dn
        self._sasl: SaslAuthenticator | None = None
        self.authenticated = not listener.uses_sasl
        if certificate_dn is not None and not listener.uses_sasl:
            # Kafka's DefaultKafkaPrincipalBuilder: the certificate's subject, unless SASL.
            self.principal = f"User:{certificate_dn}"
        else:
            self.principal = ANONYMOUS

    @property
    def listener_name(self) -> str:
        return self.listener.name

    def max_frame_bytes(self, authenticated_limit: int) -> int:
        """The largest frame this connection may send now."""
        if self.authenticated:
            return authenticated_limit
        return min(authenticated_limit, self.listener.max_unauthenticated_bytes)

    def refuses(self, api_key: int) -> str | None:
        """Why a request of ``api_key`` may not be served now (None: it may)."""
        if self.authenticated or api_key in PRE_AUTH_APIS:
            return None
        try:
            name = ApiKey(api_key).name
        except ValueError:
            name = str(api_key)
        return (f"{name} request before SASL authentication on listener "
                f"{self.listener.name} ({self.listener.protocol})")

    def authenticated_as(self, user: str) -> None:
        self.authenticated = True
        self.principal = f"User:{user}"

    # -- SASL ------------------------------------------------------------------------------

    def sasl(self, credentials: Credentials) -> SaslAuthenticator | None:
        """This connection's SASL exchange (None on a listener without SASL)."""
        if not self.listener.uses_sasl:
            return None
        if self._sasl is None:
            self._sasl = SaslAuthenticator(self.listener.sasl_mechanisms, credentials)
        return self._sasl

    def settle(self) -> None:
        """After a SASL step: a completed exchange authenticates the connection."""
        sasl = self._sasl
        if sasl is not None and sasl.complete and not self.authenticated and sasl.user:
            self.authenticated_as(sasl.user)

    @property
    def failed(self) -> bool:
        """Authentication failed: the connection is closed once the reply is out."""
        return self._sasl is not None and self._sasl.failed

    @property
    def expects_raw_token(self) -> bool:
        """After a v0 SaslHandshake the next frames are bare SASL tokens."""
        sasl = self._sasl
        return sasl is not None and sasl.legacy_tokens and sasl.state == "authenticate"


# The security of the connection the current request came in on (set by the dispatcher).
current_security: ContextVar[ConnectionSecurity | None] = ContextVar("current_security",
                                                                     default=None)
