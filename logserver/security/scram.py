"""SCRAM (RFC 5802, with SHA-256/512 as RFC 7677 and Kafka name them), the server side,
sans-I/O: client messages in, server messages out, nothing else.

Credentials are what RFC 5802 has the server keep: salt, iteration count, StoredKey and
ServerKey, never the password. Every comparison of secrets is constant-time. An unknown
user gets a made-up salt derived from a per-process secret, so that the exchange looks the
same as for a known user with a wrong password and does not tell which users exist.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["MECHANISMS", "AuthenticationFailed", "ScramCredential", "ScramServer",
           "credential_from_salted_password", "make_credential", "verify_password"]

# Kafka's mechanism name -> (hashlib name, ScramMechanism id on the wire of KIP-554).
MECHANISMS: dict[str, tuple[str, int]] = {"SCRAM-SHA-256": ("sha256", 1),
                                          "SCRAM-SHA-512": ("sha512", 2)}
MIN_ITERATIONS = 4096  # Kafka's minimum (and RFC 7677's recommendation)
MAX_ITERATIONS = 16384  # Kafka's maximum for AlterUserScramCredentials
INVALID_CREDENTIALS = ("Authentication failed during authentication due to invalid credentials "
                       "with SASL mechanism {}")


class AuthenticationFailed(Exception):
    """The exchange failed; the message is what the client is told (Kafka's wording)."""


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def _hmac(hash_name: str, key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, hash_name).digest()


def credential_from_salted_password(mechanism: str, salted_password: bytes, salt: bytes,
                                    iterations: int) -> ScramCredential:
    """What the server stores, from SaltedPassword (what AlterUserScramCredentials sends)."""
    hash_name = MECHANISMS[mechanism][0]
    client_key = _hmac(hash_name, salted_password, b"Client Key")
    return ScramCredential(salt=salt, stored_key=hashlib.new(hash_name, client_key).digest(),
                           server_key=_hmac(hash_name, salted_password, b"Server Key"),
                           iterations=iterations)


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    # Kafka's ScramFormatter uses the password's UTF-8 bytes as they are (no SASLprep).
    return hashlib.pbkdf2_hmac(MECHANISMS[mechanism][0], password.encode(), salt, iterations)


def make_credential(mechanism: str, password: str, iterations: int = MIN_ITERATIONS,
                    salt: bytes | None = None) -> ScramCredential:
    salt = os.urandom(32) if salt is None else salt
    return credential_from_salted_password(
        mechanism, salted_password(mechanism, password, salt, iterations), salt, iterations)


def verify_password(mechanism: str, credential: ScramCredential, password: str) -> bool:
    """Whether ``password`` matches a stored credential (SASL/PLAIN against SCRAM hashes)."""
    candidate = make_credential(mechanism, password, credential.iterations, credential.salt)
    return hmac.compare_digest(candidate.stored_key, credential.stored_key)


def _attributes(message: str, what: str) -> list[tuple[str, str]]:
    """``key=value`` pairs; RFC 5802 keys are one letter, Kafka's extensions
    (``tokenauth=true``) are words."""
    pairs = []
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if not sep or not key.isalpha():
            raise AuthenticationFailed(f"Invalid SCRAM {what} message")
        pairs.append((key, value))
    return pairs


def _sasl_name(text: str) -> str:
    """RFC 5802 saslname: ``=2C`` is ``,`` and ``=3D`` is ``=``; any other ``=`` is an error."""
    out, index = [], 0
    while index < len(text):
        if text[index] == "=":
            escape = text[index:index + 3]
            if escape not in ("=2C", "=3D"):
                raise AuthenticationFailed("Invalid SCRAM client first message: bad user name")
            out.append("," if escape == "=2C" else "=")
            index += 3
        else:
            out.append(text[index])
            index += 1
    return "".join(out)


class ScramServer:
    """One SCRAM exchange: :meth:`step` takes each client message and returns the reply.

    ``lookup`` gives a user's stored credential for this mechanism (None: unknown user).
    After the final step :attr:`complete` is true and :attr:`username` is authenticated;
    any failure raises :class:`AuthenticationFailed` and the exchange is over.
    """

    _UNKNOWN_USER_SECRET = secrets.token_bytes(32)

    def __init__(self, mechanism: str, lookup: Callable[[str], ScramCredential | None],
                 nonce: Callable[[], str] | None = None) -> None:
        if mechanism not in MECHANISMS:
            raise ValueError(f"not a SCRAM mechanism: {mechanism}")
        self.mechanism = mechanism
        self._hash = MECHANISMS[mechanism][0]
        self._lookup = lookup
        self._nonce = nonce or (lambda: secrets.token_urlsafe(24))
        self._state = "first"
        self._client_first_bare = ""
        self._server_first = ""
        self._gs2_header = ""
        self._nonce_value = ""
        self._credential: ScramCredential | None = None
        self._known_user = False
        self.username: str | None = None
        self.complete = False

    def step(self, message: bytes) -> bytes:
        try:
            text = message.decode("utf-8")
        except UnicodeDecodeError:
            self._state = "failed"
            raise AuthenticationFailed("Invalid SCRAM message: not UTF-8") from None
        try:
            if self._state == "first":
                return self._client_first(text)
            if self._state == "final":
                return self._client_final(text)
        except AuthenticationFailed:
            self._state = "failed"
            raise
        raise AuthenticationFailed(f"Unexpected SCRAM message in state {self._state}")

    def _client_first(self, text: str) -> bytes:
        # gs2-header: "n,," / "y,," / "n,a=authzid,"; channel binding ("p=") is not offered.
        parts = text.split(",", 2)
        if len(parts) != 3 or parts[0] not in ("n", "y"):
            if parts and parts[0].startswith("p="):
                raise AuthenticationFailed("Invalid SCRAM client first message: channel binding "
                                           "is not supported")
            raise AuthenticationFailed("Invalid SCRAM client first message")
        authzid = parts[1]
        if authzid and not authzid.startswith("a="):
            raise AuthenticationFailed("Invalid SCRAM client first message")
        self._gs2_header = f"{parts[0]},{authzid},"
        bare = parts[2]
        attributes = _attributes(bare, "client first")
        if attributes and attributes[0][0] == "m":
            raise AuthenticationFailed("Invalid SCRAM client first message: mandatory "
                                       "extension not supported")
        if len(attributes) < 2 or attributes[0][0] != "n" or attributes[1][0] != "r" \
                or not attributes[1][1]:
            raise AuthenticationFailed("Invalid SCRAM client first message")
        username = _sasl_name(attributes[0][1])
        if not username:
            raise AuthenticationFailed("Invalid SCRAM client first message: empty user name")
        if authzid and _sasl_name(authzid[2:]) != username:
            raise AuthenticationFailed("Authentication failed: Client requested an authorization "
                                       "id that is different from username")
        extensions = dict(attributes[2:])
        if extensions.get("tokenauth", "").lower() == "true":
            raise AuthenticationFailed("Authentication failed: delegation tokens are not supported")
        credential = self._lookup(username)
        self._known_user = credential is not None
        if credential is None:
            fake_salt = _hmac("sha256", self._UNKNOWN_USER_SECRET, username.encode())
            credential = ScramCredential(fake_salt, secrets.token_bytes(64),
                                         secrets.token_bytes(64), MIN_ITERATIONS)
        self.username = username
        self._credential = credential
        self._client_first_bare = bare
        self._nonce_value = attributes[1][1] + self._nonce()
        self._server_first = (f"r={self._nonce_value},"
                              f"s={base64.b64encode(credential.salt).decode()},"
                              f"i={credential.iterations}")
        self._state = "final"
        return self._server_first.encode()

    def _client_final(self, text: str) -> bytes:
        attributes = _attributes(text, "client final")
        if len(attributes) < 3 or attributes[0][0] != "c" or attributes[1][0] != "r" \
                or attributes[-1][0] != "p":
            raise AuthenticationFailed("Invalid SCRAM client final message")
        try:
            binding = base64.b64decode(attributes[0][1], validate=True)
            proof = base64.b64decode(attributes[-1][1], validate=True)
        except ValueError:
            raise AuthenticationFailed("Invalid SCRAM client final message") from None
        credential = self._credential
        assert credential is not None
        fail = INVALID_CREDENTIALS.format(self.mechanism)
        if not hmac.compare_digest(binding, self._gs2_header.encode()):
            raise AuthenticationFailed("Invalid SCRAM client final message: channel binding "
                                       "does not match the client first message")
        # As Kafka: the nonce must end with ours. librdkafka (through 2.x) sends its own
        # nonce once more in front of the combined one, and Kafka accepts that.
        nonce, expected = attributes[1][1].encode(), self._nonce_value.encode()
        if len(nonce) < len(expected) or not hmac.compare_digest(nonce[-len(expected):], expected):
            raise AuthenticationFailed("Invalid SCRAM client final message: nonce mismatch")
        without_proof = text[:text.rindex(",p=")]
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        signature = _hmac(self._hash, credential.stored_key, auth_message)
        if len(proof) != len(signature):
            raise AuthenticationFailed(fail)
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        computed = hashlib.new(self._hash, client_key).digest()
        if not hmac.compare_digest(computed, credential.stored_key) or not self._known_user:
            raise AuthenticationFailed(fail)
        self._state = "done"
        self.complete = True
        server_signature = _hmac(self._hash, credential.server_key, auth_message)
        return b"v=" + base64.b64encode(server_signature)
