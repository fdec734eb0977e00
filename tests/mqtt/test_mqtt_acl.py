"""Authorization and password checks without sockets: the default device binding, the
mosquitto ACL file format, filter containment, and password files written by Debian's
real ``mosquitto_passwd``."""

from __future__ import annotations

import subprocess

import pytest

from mqtt_bridge.acl import AclFile, Identity, IdentityBinding, filter_within, strip_share
from mqtt_bridge.auth import Credentials, hash_password, verify
from mqtt_bridge.config import BridgeConfig
from mqtt_bridge.mapping import DEFAULT_DOWNLINK, DEFAULT_UPLINK_TOPICS, Mapping, UplinkTopics


@pytest.mark.parametrize(
    ("flt", "acl", "within"),
    [
        ("a/b", "a/b", True),
        ("a/b", "a/+", True),
        ("a/+", "a/+", True),
        ("a/+", "a/b", False),
        ("a/#", "a/+", False),
        ("a/b/c", "a/#", True),
        ("a", "a/#", True),
        ("#", "a/#", False),
        ("+/b", "a/b", False),
        ("a/b/c", "a/+", False),
        ("a/+/c", "a/#", True),
        ("#", "#", True),
    ],
)
def test_filter_within(flt: str, acl: str, within: bool) -> None:
    assert filter_within(flt, acl) is within


def test_strip_share() -> None:
    assert strip_share("$share/g/devices/+/commands") == "devices/+/commands"
    assert strip_share("ota") == "ota"
    assert strip_share("$share/g") == ""


def _binding() -> IdentityBinding:
    return IdentityBinding([r.mqtt_topic for r in Mapping.parse([], DEFAULT_DOWNLINK).downlink])


def test_identity_binding_confines_a_device() -> None:
    b = _binding()
    anon = Identity("dev-a")
    assert b.may_publish(anon, "devices/dev-a/telemetry")
    assert not b.may_publish(anon, "devices/dev-b/telemetry")
    assert not b.may_publish(anon, "ota")
    assert not b.may_publish(anon, "devices/dev-a")
    assert b.may_subscribe(anon, "devices/dev-a/commands")
    assert b.may_subscribe(anon, "ota")
    assert b.may_subscribe(anon, "$share/g/ota")
    for flt in ("#", "devices/+/commands", "devices/dev-b/commands", "devices/dev-a/#", "+"):
        assert not b.may_subscribe(anon, flt), flt


def test_identity_binding_needs_client_id_equal_to_identity() -> None:
    b = _binding()
    own = Identity("dev-a", "dev-a")
    other = Identity("dev-a", "dev-b")  # authenticated as dev-b, claims dev-a's id
    assert b.may_publish(own, "devices/dev-a/telemetry")
    assert not b.may_publish(other, "devices/dev-a/telemetry")
    assert not b.may_publish(other, "devices/dev-b/telemetry")
    assert not b.may_subscribe(other, "devices/dev-a/commands")
    assert b.may_subscribe(other, "ota")  # broadcasts are for everyone
    for cid in ("a/b", "a+", "a#"):
        assert Identity(cid).device_id is None


ACL = """
# anonymous clients
topic read ota
topic readwrite public/#

user ops
topic read devices/+/commands
topic write ops/#
topic deny ops/secret

user reader
topic read #
topic deny devices/dev-x/#

pattern write devices/%u/#
pattern read devices/%c/commands
pattern deny devices/%c/commands/forbidden
"""


def test_acl_file_sections_patterns_and_denies() -> None:
    acl = AclFile.parse(ACL)
    anon = Identity("dev-a")
    assert acl.may_subscribe(anon, "ota") and not acl.may_publish(anon, "ota")
    assert acl.may_publish(anon, "public/x") and acl.may_subscribe(anon, "public/#")
    # %u needs a username: anonymous devices get no write pattern
    assert not acl.may_publish(anon, "devices/dev-a/telemetry")
    assert acl.may_subscribe(anon, "devices/dev-a/commands")
    assert not acl.may_subscribe(anon, "devices/dev-b/commands")

    dev = Identity("dev-a", "dev-a")
    assert acl.may_publish(dev, "devices/dev-a/telemetry")
    assert not acl.may_publish(dev, "devices/dev-b/telemetry")
    assert not acl.may_subscribe(dev, "ota")  # user sections do not inherit the anonymous one
    assert not acl.may_publish(dev, "public/x")

    ops = Identity("console", "ops")
    assert acl.may_subscribe(ops, "devices/+/commands")
    assert acl.may_subscribe(ops, "$share/g/devices/+/commands")
    assert not acl.may_subscribe(ops, "devices/#")
    assert acl.may_publish(ops, "ops/x") and not acl.may_publish(ops, "ops/secret")
    assert not acl.may_subscribe(ops, "ops/#")  # write only

    reader = Identity("r", "reader")
    assert acl.may_subscribe(reader, "devices/dev-a/telemetry")
    assert not acl.may_subscribe(reader, "#")  # overlaps a deny entry
    assert not acl.may_subscribe(reader, "devices/+/x")
    # deny patterns: the device's own commands sub-topic
    assert not acl.may_subscribe(Identity("dev-a"), "devices/dev-a/commands/forbidden")
    # wildcards in the id never widen a pattern
    assert not acl.may_publish(Identity("x", "+"), "devices/dev-a/t")


def test_acl_file_errors() -> None:
    with pytest.raises(ValueError, match="expected user, topic or pattern"):
        AclFile.parse("topics read a\n")
    with pytest.raises(ValueError, match="needs a name"):
        AclFile.parse("user\n")


def test_uplink_topics_allow_list() -> None:
    up = UplinkTopics(["telemetry", "metrics-*"], {"commands", "ota", "__mqtt_bridge_sessions"})
    assert up.permits("telemetry") and up.permits("metrics-cpu")
    for name in ("commands", "ota", "__mqtt_bridge_sessions", "__consumer_offsets", "new", "telemetry2"):
        assert not up.permits(name), name
    assert not UplinkTopics(["*"], {"commands"}).permits("__x")
    assert "telemetry" in DEFAULT_UPLINK_TOPICS


def test_config_refuses_inconsistent_tls() -> None:
    with pytest.raises(ValueError, match="use_identity_as_username"):
        BridgeConfig.from_mapping({"use_identity_as_username": True})
    with pytest.raises(ValueError, match="tls_cafile"):
        BridgeConfig.from_mapping({"require_certificate": True, "tls_certfile": "x.pem"})
    with pytest.raises(ValueError, match="no listener"):
        BridgeConfig.from_mapping({"plaintext": False})


def test_reads_mosquitto_passwd_files(tmp_path) -> None:
    path = tmp_path / "passwd"
    subprocess.run(["mosquitto_passwd", "-c", "-b", str(path), "alice", "wonder land:1"], check=True,
                   timeout=20)
    subprocess.run(["mosquitto_passwd", "-b", str(path), "bob", "s3cret"], check=True, timeout=20)
    assert path.read_text().startswith("alice:$7$")
    creds = Credentials.load(path)
    assert creds.check("alice", b"wonder land:1")
    assert creds.check("bob", b"s3cret")
    assert not creds.check("alice", b"s3cret")
    assert not creds.check("bob", b"")
    assert not creds.check("bob", None)
    assert not creds.check("carol", b"s3cret")
    assert not creds.check(None, b"s3cret")


def test_our_hashes_are_mosquitto_format_and_old_formats_still_read() -> None:
    secret = hash_password("pw")
    _, scheme, iterations, salt, digest = secret.split("$")
    assert (scheme, iterations) == ("7", "101")
    assert verify(secret, b"pw") and not verify(secret, b"pW")
    # mosquitto 1.x: $6$ salted SHA-512; this bridge's earlier $pbkdf2-sha256$; plain text
    import base64
    import hashlib

    salt_b = b"0123456789ab"
    six = f"$6${base64.b64encode(salt_b).decode()}$" + base64.b64encode(
        hashlib.sha512(b"pw" + salt_b).digest()).decode()
    assert verify(six, b"pw") and not verify(six, b"px")
    old = "$pbkdf2-sha256$1000$" + salt_b.hex() + "$" + hashlib.pbkdf2_hmac(
        "sha256", b"pw", salt_b, 1000).hex()
    assert verify(old, b"pw") and not verify(old, b"px")
    assert verify("plain", b"plain") and not verify("plain", b"plaiN")
    with pytest.raises(ValueError):
        verify("$7$101$not base64!$abc", b"pw")


def test_unknown_users_cost_a_hash_of_the_files_kind() -> None:
    """The dummy an unknown user is checked against uses the file's scheme and iterations."""
    creds = Credentials({"a": hash_password("x", 2000)})
    _, scheme, iterations, _salt, _digest = creds.dummy.split("$")
    assert (scheme, iterations) == ("7", "2000")
