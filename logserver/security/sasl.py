"""The SASL exchange of one connection, sans-I/O: SaslHandshake picks a mechanism,
SaslAuthenticate carries its tokens (KIP-152), or, after a v0 handshake, the tokens come
as bare size-prefixed frames (the legacy framing).

Mechanisms: SCRAM-SHA-256/512 (:mod:`logserver.security.scram`) and PLAIN, whose
password is checked against the user's stored SCRAM hashes (as Redpanda does), so one
credential store serves both. PLAIN's check costs a PBKDF2 run; it is handed back to the
caller as a :class:`PasswordCheck` to run off the event loop.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from kafkaproto import ErrorCode
from logserver.security.scram import (
    MECHANISMS,
    AuthenticationFailed,
    ScramCredential,
    ScramServer,
    make_credential,
    verify_password,
)

__all__ = ["PasswordCheck", "SaslAuthenticator", "SaslReply"]

PLAIN_FAILED = "Authentication failed: Invalid username or password"


class Credentials(Protocol):
    def lookup(self, user: str, mechanism: str) -> ScramCredential | None: ...

    def mechanisms_of(self, user: str) -> dict[str, ScramCredential]: ...


@dataclass(frozen=True)
class SaslReply:
    """What to answer a SaslAuthenticate (or legacy token) with."""

    error_code: int
    error_message: str | None
    token: bytes = b""


@dataclass(frozen=True)
class PasswordCheck:
    """A PLAIN password to verify (CPU-bound): run :meth:`run`, then
    :meth:`SaslAuthenticator.password_checked` with its result."""

    user: str
    run: Callable[[], bool]


class SaslAuthenticator:
    """States: ``handshake`` -> ``authenticate`` -> ``complete`` (or ``failed``)."""

    def __init__(self, enabled: tuple[str, ...], credentials: Credentials,
                 nonce: Callable[[], str] | None = None) -> None:
        self.enabled = enabled
        self._credentials = credentials
        self._nonce = nonce
        self.state = "handshake"
        self.mechanism: str | None = None
        self.legacy_tokens = False  # v0 handshake: bare tokens follow, not SaslAuthenticate
        self.user: str | None = None
        self._scram: ScramServer | None = None
        self._checking = False

    @property
    def complete(self) -> bool:
        return self.state == "complete"

    @property
    def failed(self) -> bool:
        return self.state == "failed"

    def handshake(self, mechanism: str, version: int) -> tuple[int, list[str]]:
        """SaslHandshake: (error code, enabled mechanisms)."""
        mechanisms = list(self.enabled)
        if self.state != "handshake":
            return ErrorCode.ILLEGAL_SASL_STATE, mechanisms
        if mechanism not in self.enabled:
            self.state = "failed"  # Kafka answers, then closes the connection
            return ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms
        self.mechanism = mechanism
        self.legacy_tokens = version == 0
        if mechanism in MECHANISMS:
            self._scram = ScramServer(mechanism, lambda user: self._credentials.lookup(
                user, mechanism), self._nonce)
        self.state = "authenticate"
        return ErrorCode.NONE, mechanisms

    def authenticate(self, token: bytes) -> SaslReply | PasswordCheck:
        """One client token; a failure ends the exchange (the connection is closed after
        the reply is sent, as Kafka does)."""
        if self.state == "complete":
            return SaslReply(ErrorCode.ILLEGAL_SASL_STATE,
                             "SaslAuthenticate request received after successful authentication")
        if self.state != "authenticate" or self._checking:
            self.state = "failed"
            return SaslReply(ErrorCode.ILLEGAL_SASL_STATE,
                             "Unexpected SaslAuthenticate request before SaslHandshake")
        try:
            if self._scram is not None:
                reply = self._scram.step(token)
                if self._scram.complete:
                    self.user = self._scram.username
                    self.state = "complete"
                return SaslReply(ErrorCode.NONE, None, reply)
            return self._plain(token)
        except AuthenticationFailed as exc:
            self.state = "failed"
            return SaslReply(ErrorCode.SASL_AUTHENTICATION_FAILED, str(exc))

    def _plain(self, token: bytes) -> PasswordCheck:
        """RFC 4616: ``[authzid] NUL authcid NUL passwd``."""
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise AuthenticationFailed("Authentication failed: Invalid SASL/PLAIN response: "
                                       "expected 3 tokens")
        try:
            authzid, user, password = (part.decode("utf-8") for part in parts)
        except UnicodeDecodeError:
            raise AuthenticationFailed("Authentication failed: Invalid SASL/PLAIN response: "
                                       "not UTF-8") from None
        if not user:
            raise AuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise AuthenticationFailed("Authentication failed: password not specified")
        if authzid and authzid != user:
            raise AuthenticationFailed("Authentication failed: Client requested an authorization "
                                       "id that is different from username")
        stored = self._credentials.mechanisms_of(user)
        self._checking = True
        return PasswordCheck(user, lambda: check_password(stored, password))

    def password_checked(self, check: PasswordCheck, ok: bool) -> SaslReply:
        self._checking = False
        if not ok:
            self.state = "failed"
            return SaslReply(ErrorCode.SASL_AUTHENTICATION_FAILED, PLAIN_FAILED)
        self.user = check.user
        self.state = "complete"
        return SaslReply(ErrorCode.NONE, None, b"")


_DUMMY = make_credential("SCRAM-SHA-256", "unknown user", 4096, b"\0" * 32)


def check_password(stored: dict[str, ScramCredential], password: str) -> bool:
    """True when ``password`` matches one of the user's SCRAM credentials. An unknown user
    costs the same PBKDF2 work, so timing does not tell which users exist."""
    if not stored:
        verify_password("SCRAM-SHA-256", _DUMMY, password)
        return False
    ok = False
    for mechanism, credential in sorted(stored.items()):
        ok = verify_password(mechanism, credential, password) or ok
    return hmac.compare_digest(b"\1" if ok else b"\0", b"\1")
