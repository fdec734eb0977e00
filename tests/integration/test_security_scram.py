"""The SASL/SCRAM state machines without sockets: RFC 7677's test vector, every way a
client message can be wrong, PLAIN against stored SCRAM hashes, the handshake states,
and the credential file (salted hashes only, owner-only, atomic)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import stat

import pytest

from kafkaproto import ErrorCode
from logserver.security.credentials import CredentialStore
from logserver.security.sasl import PasswordCheck, SaslAuthenticator, SaslReply
from logserver.security.scram import (
    AuthenticationFailed,
    ScramServer,
    credential_from_salted_password,
    make_credential,
)

# RFC 7677 section 3.
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_SERVER_FIRST = (b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                    b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
RFC_CLIENT_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def rfc_server(password: str = "pencil") -> ScramServer:
    credential = make_credential("SCRAM-SHA-256", password, 4096, RFC_SALT)
    return ScramServer("SCRAM-SHA-256", lambda user: credential if user == "user" else None,
                       nonce=lambda: RFC_SERVER_NONCE)


def test_rfc7677_vector():
    server = rfc_server()
    assert server.step(RFC_CLIENT_FIRST) == RFC_SERVER_FIRST
    assert not server.complete
    assert server.step(RFC_CLIENT_FINAL) == RFC_SERVER_FINAL
    assert server.complete and server.username == "user"


def test_wrong_password_fails_with_kafkas_message():
    server = rfc_server(password="not pencil")
    server.step(RFC_CLIENT_FIRST)
    with pytest.raises(AuthenticationFailed, match="invalid credentials with SASL mechanism "
                                                   "SCRAM-SHA-256"):
        server.step(RFC_CLIENT_FINAL)
    assert not server.complete
    with pytest.raises(AuthenticationFailed):  # the exchange is over
        server.step(RFC_CLIENT_FINAL)


def _client(mechanism: str, user: str, password: str, server: ScramServer,
            librdkafka_nonce: bool = False) -> bytes:
    """A minimal RFC 5802 client, written from the RFC, to drive the server."""
    hash_name = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism]
    cnonce = base64.b64encode(os.urandom(18)).decode()
    bare = f"n={user},r={cnonce}"
    server_first = server.step(f"n,,{bare}".encode()).decode()
    attrs = dict(part.split("=", 1) for part in server_first.split(","))
    assert attrs["r"].startswith(cnonce)
    salted = hashlib.pbkdf2_hmac(hash_name, password.encode(), base64.b64decode(attrs["s"]),
                                 int(attrs["i"]))
    client_key = hmac.new(salted, b"Client Key", hash_name).digest()
    stored = hashlib.new(hash_name, client_key).digest()
    nonce = (cnonce + attrs["r"]) if librdkafka_nonce else attrs["r"]
    without_proof = f"c=biws,r={nonce}"
    auth = f"{bare},{server_first},{without_proof}".encode()
    signature = hmac.new(stored, auth, hash_name).digest()
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature, strict=True)))
    final = server.step(f"{without_proof},p={proof.decode()}".encode())
    server_key = hmac.new(salted, b"Server Key", hash_name).digest()
    assert final == b"v=" + base64.b64encode(hmac.new(server_key, auth, hash_name).digest())
    return final


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_both_mechanisms_and_librdkafkas_nonce(mechanism):
    credential = make_credential(mechanism, "s3cret", 4096)
    for librdkafka in (False, True):
        server = ScramServer(mechanism, lambda user: credential if user == "alice" else None)
        _client(mechanism, "alice", "s3cret", server, librdkafka_nonce=librdkafka)
        assert server.complete and server.username == "alice"


def test_unknown_user_looks_like_a_wrong_password():
    server = ScramServer("SCRAM-SHA-256", lambda user: None)
    first = server.step(b"n,,n=nobody,r=abc").decode()
    assert first.startswith("r=abc") and ",s=" in first and first.endswith(",i=4096")
    again = ScramServer("SCRAM-SHA-256", lambda user: None).step(b"n,,n=nobody,r=abc").decode()
    assert first.split(",")[1] == again.split(",")[1], "the fake salt must be stable per user"
    with pytest.raises(AuthenticationFailed, match="invalid credentials"):
        _client("SCRAM-SHA-256", "nobody", "x", ScramServer("SCRAM-SHA-256", lambda user: None))


@pytest.mark.parametrize("message, error", [
    (b"p=tls-unique,,n=user,r=abc", "channel binding"),
    (b"x,,n=user,r=abc", "Invalid SCRAM client first message"),
    (b"n,,m=ext,n=user,r=abc", "mandatory extension"),
    (b"n,,n=,r=abc", "empty user name"),
    (b"n,,n=us=er,r=abc", "bad user name"),
    (b"n,,r=abc,n=user", "Invalid SCRAM client first message"),
    (b"n,a=admin,n=user,r=abc", "authorization id that is different"),
    (b"n,,n=user,r=abc,tokenauth=true", "delegation tokens"),
    (b"\xff\xfe", "not UTF-8"),
])
def test_bad_client_first(message, error):
    with pytest.raises(AuthenticationFailed, match=error):
        rfc_server().step(message)


def test_escaped_user_name_and_matching_authzid():
    credential = make_credential("SCRAM-SHA-256", "pw", 4096)
    seen = []
    server = ScramServer("SCRAM-SHA-256", lambda user: seen.append(user) or credential)
    server.step(b"n,a=a=2Cb=3Dc,n=a=2Cb=3Dc,r=abc")
    assert seen == ["a,b=c"]


@pytest.mark.parametrize("final, error", [
    (RFC_CLIENT_FINAL.replace(b"c=biws", b"c=eSws"), "channel binding"),
    (RFC_CLIENT_FINAL.replace(b"r=rOpr", b"r=XOpr"), "nonce mismatch"),
    (b"c=biws,p=abc", "Invalid SCRAM client final message"),
    (RFC_CLIENT_FINAL[:-10] + b"!!!!!!!!!=", "Invalid SCRAM client final message"),
    (RFC_CLIENT_FINAL.replace(b"p=dHzb", b"p=AAAA"), "invalid credentials"),
])
def test_bad_client_final(final, error):
    server = rfc_server()
    server.step(RFC_CLIENT_FIRST)
    with pytest.raises(AuthenticationFailed, match=error):
        server.step(final)


class Store:
    def __init__(self, **users: str) -> None:
        self.users = {u: {"SCRAM-SHA-256": make_credential("SCRAM-SHA-256", p)}
                      for u, p in users.items()}

    def lookup(self, user, mechanism):
        return self.users.get(user, {}).get(mechanism)

    def mechanisms_of(self, user):
        return dict(self.users.get(user, {}))


def _plain(auth: SaslAuthenticator, token: bytes) -> SaslReply:
    step = auth.authenticate(token)
    if isinstance(step, PasswordCheck):
        return auth.password_checked(step, step.run())
    return step


def test_handshake_states():
    auth = SaslAuthenticator(("PLAIN", "SCRAM-SHA-256"), Store())
    assert auth.handshake("GSSAPI", 1) == (ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                                           ["PLAIN", "SCRAM-SHA-256"])
    assert auth.failed
    auth = SaslAuthenticator(("PLAIN",), Store())
    reply = auth.authenticate(b"\0u\0p")
    assert isinstance(reply, SaslReply) and reply.error_code == ErrorCode.ILLEGAL_SASL_STATE
    auth = SaslAuthenticator(("PLAIN",), Store())
    assert auth.handshake("PLAIN", 1) == (ErrorCode.NONE, ["PLAIN"])
    assert not auth.legacy_tokens
    assert auth.handshake("PLAIN", 1)[0] == ErrorCode.ILLEGAL_SASL_STATE
    legacy = SaslAuthenticator(("PLAIN",), Store())
    legacy.handshake("PLAIN", 0)
    assert legacy.legacy_tokens


def test_plain_against_scram_hashes():
    auth = SaslAuthenticator(("PLAIN",), Store(alice="pw"))
    auth.handshake("PLAIN", 1)
    assert _plain(auth, b"\0alice\0pw") == SaslReply(ErrorCode.NONE, None, b"")
    assert auth.complete and auth.user == "alice"
    again = _plain(auth, b"\0alice\0pw")
    assert again.error_code == ErrorCode.ILLEGAL_SASL_STATE


@pytest.mark.parametrize("token, message", [
    (b"\0alice\0wrong", "Invalid username or password"),
    (b"\0bob\0pw", "Invalid username or password"),
    (b"alice\0pw", "expected 3 tokens"),
    (b"\0\0pw", "username not specified"),
    (b"\0alice\0", "password not specified"),
    (b"bob\0alice\0pw", "authorization id that is different"),
])
def test_plain_failures(token, message):
    auth = SaslAuthenticator(("PLAIN",), Store(alice="pw"))
    auth.handshake("PLAIN", 1)
    reply = _plain(auth, token)
    assert reply.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert message in (reply.error_message or "")
    assert auth.failed


def test_credentials_from_salted_password_match():
    """AlterUserScramCredentials sends SaltedPassword; what we store from it verifies."""
    salted = hashlib.pbkdf2_hmac("sha512", b"pw", b"salt", 4096)
    stored = credential_from_salted_password("SCRAM-SHA-512", salted, b"salt", 4096)
    assert stored == make_credential("SCRAM-SHA-512", "pw", 4096, b"salt")


def test_credential_file(tmp_path):
    store = CredentialStore(tmp_path)
    store.upsert("alice", "SCRAM-SHA-256", make_credential("SCRAM-SHA-256", "top secret"))
    older = store.snapshot()
    store.upsert("bob", "SCRAM-SHA-512", make_credential("SCRAM-SHA-512", "pw", 8192))
    store.save()
    store.save(older)  # an older snapshot never overwrites a newer one
    text = store.path.read_text()
    assert "top secret" not in text
    document = json.loads(text)
    assert sorted(document["users"]) == ["alice", "bob"]
    assert document["users"]["bob"]["SCRAM-SHA-512"]["iterations"] == 8192
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
    assert not list(tmp_path.glob("*.tmp"))
    loaded = CredentialStore(tmp_path).load()
    assert loaded.lookup("alice", "SCRAM-SHA-256") == store.lookup("alice", "SCRAM-SHA-256")
    assert loaded.delete("alice", "SCRAM-SHA-256") and not loaded.delete("alice", "SCRAM-SHA-256")
    assert loaded.users() == ["bob"]


def test_scram_admin_alter_and_describe(tmp_path):
    from logserver.security.scram_admin import Alteration, alter, describe

    store = CredentialStore(tmp_path)
    salted = hashlib.pbkdf2_hmac("sha256", b"pw", b"salt", 4096)
    results = alter(store, [
        Alteration("alice", 1, 4096, b"salt", salted),
        Alteration("bob", 1, 4096, b"salt", salted), Alteration("bob", 1),  # twice: refused
        Alteration("carol", 0, 4096, b"salt", salted),
        Alteration("dave", 2, 20000, b"salt", salted),
        Alteration("erin", 1, 4096, b"", salted),
        Alteration("", 1, 4096, b"salt", salted),
        Alteration("frank", 2),
    ])
    codes = {r.user: (r.error_code, r.error_message) for r in results}
    assert codes["alice"] == (ErrorCode.NONE, None)
    assert codes["bob"][0] == ErrorCode.DUPLICATE_RESOURCE
    assert codes["carol"] == (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
    assert codes["dave"] == (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
    assert codes["erin"][0] == ErrorCode.UNACCEPTABLE_CREDENTIAL
    assert codes[""] == (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
    assert codes["frank"][0] == ErrorCode.RESOURCE_NOT_FOUND
    assert store.users() == ["alice"]
    assert store.lookup("alice", "SCRAM-SHA-256") == make_credential("SCRAM-SHA-256", "pw", 4096,
                                                                     b"salt")
    described = describe(store, ["alice", "zed", "alice"])
    assert [(r.user, r.error_code) for r in described] == [
        ("alice", ErrorCode.DUPLICATE_RESOURCE), ("zed", ErrorCode.RESOURCE_NOT_FOUND)]
    assert [(r.user, r.credentials) for r in describe(store, None)] == [("alice", ((1, 4096),))]
    assert describe(store, []) == describe(store, None)
