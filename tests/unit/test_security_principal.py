"""The principal the dispatcher sets for every request (``request_context.principal``,
the name the authorizer reads): ANONYMOUS on PLAINTEXT, the certificate subject on SSL,
``User:<name>`` once SASL succeeded; and what a SASL connection may send before that.
A real broker over in-memory storage; frames encoded as a client would."""

from __future__ import annotations

import asyncio
import inspect

from kafkaproto import ApiKey
from kafkaproto.frames import encode_request
from kafkaproto.messages import (
    ApiVersionsRequest,
    MetadataRequest,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
)
from logserver.broker import Broker
from logserver.config import load_config
from logserver.dispatch import Dispatcher
from logserver.request_context import listener_name, principal
from logserver.security.listeners import ListenerSecurity
from logserver.security.scram import make_credential
from logserver.security.session import ConnectionSecurity
from logserver.storage.memory import MemoryStorage


def frame(api_key: int, version: int, body) -> bytearray:
    return bytearray(encode_request(api_key, version, 1, "unit", body)[4:])


def test_principal_per_connection(tmp_path):
    async def main() -> None:
        config = load_config({"log.dirs": str(tmp_path)}, environ={})
        broker = Broker(config, storage=MemoryStorage(config))
        broker.open()
        await broker.start()
        broker.scram.upsert("alice", "SCRAM-SHA-256", make_credential("SCRAM-SHA-256", "pw"))
        dispatcher = Dispatcher(broker)
        versions = frame(ApiKey.API_VERSIONS, 0, ApiVersionsRequest())
        metadata = frame(ApiKey.METADATA, 4, MetadataRequest(topics=[]))
        try:
            dispatcher.dispatch(versions, "127.0.0.1:1")
            assert principal.get() == "User:ANONYMOUS"
            ssl_listener = ListenerSecurity(name="CLIENTS", protocol="SSL")
            ssl_conn = ConnectionSecurity(ssl_listener, "CN=alice,O=acme")
            dispatcher.dispatch(versions, "127.0.0.1:2", ssl_conn)
            assert principal.get() == "User:CN=alice,O=acme"
            assert listener_name.get() == "CLIENTS"

            sasl_listener = ListenerSecurity(name="SASL_PLAINTEXT", protocol="SASL_PLAINTEXT",
                                             sasl_mechanisms=("PLAIN",))
            conn = ConnectionSecurity(sasl_listener)
            assert conn.max_frame_bytes(100 << 20) == 524288
            assert dispatcher.dispatch(metadata, "127.0.0.1:3", conn)[0] is None  # refused
            header, _ = dispatcher.dispatch(versions, "127.0.0.1:3", conn)
            assert header is not None and principal.get() == "User:ANONYMOUS"
            header, response = dispatcher.dispatch(
                frame(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="PLAIN")),
                "127.0.0.1:3", conn)
            assert response.error_code == 0 and response.mechanisms == ["PLAIN"]
            header, result = dispatcher.dispatch(
                frame(ApiKey.SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(
                    auth_bytes=b"\0alice\0pw")), "127.0.0.1:3", conn)
            response = await result if inspect.isawaitable(result) else result
            assert response.error_code == 0
            assert conn.authenticated and conn.max_frame_bytes(100 << 20) == 100 << 20
            header, _ = dispatcher.dispatch(metadata, "127.0.0.1:3", conn)
            assert header is not None and principal.get() == "User:alice"
        finally:
            await broker.close()

    asyncio.run(main())


def test_passwords_are_not_described(tmp_path):
    """DescribeConfigs of the broker: ssl.key.password and ssl.keystore.key are null and
    marked sensitive, as Kafka reports password settings."""
    from kafkaproto import RequestHeader
    from kafkaproto.messages import DescribeConfigsRequest
    from logserver.handlers import describe_configs

    config = load_config({"log.dirs": str(tmp_path), "ssl.key.password": "hunter2",
                          "ssl.keystore.key": "-----BEGIN PRIVATE KEY-----"}, environ={})
    broker = Broker(config, storage=MemoryStorage(config))
    request = DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=4, resource_name="", configuration_keys=None)])
    response = describe_configs.handle(broker, RequestHeader(32, 4, 1, "unit"), request)
    entries = {c.name: c for c in response.results[0].configs}
    for name in ("ssl.key.password", "ssl.keystore.key"):
        assert entries[name].value is None and entries[name].is_sensitive, entries[name]
    assert entries["ssl.client.auth"].value == "none" and not entries["ssl.client.auth"].is_sensitive
    assert "hunter2" not in repr(response)
