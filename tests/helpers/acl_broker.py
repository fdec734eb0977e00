"""Handlers' ACL checks in-process: a Broker on the in-memory storage engine with the
authorizer on and the given ACLs (no sockets), and handler calls as a named principal
(set in the request context as the dispatcher does)."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from kafkaproto import ErrorCode, RequestHeader
from kafkaproto.messages import CreateTopicsRequest
from logserver import request_context
from logserver.broker import Broker
from logserver.config import load_config
from logserver.security.acl import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from logserver.storage.memory import MemoryStorage

ADMIN, ALICE, BOB = "User:admin", "User:alice", "User:bob"


TAF, GAF = ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.GROUP_AUTHORIZATION_FAILED


CAF = ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def allow(resource_type: ResourceType, name: str, operation: AclOperation,
          pattern: PatternType = PatternType.LITERAL) -> AclBinding:
    return AclBinding(resource_type, name, pattern, ALICE, "*", operation, AclPermissionType.ALLOW)


def with_authorizer(scenario: Callable[[Broker], Awaitable[None]], acls: list[AclBinding]) -> None:
    async def main() -> None:
        config = load_config({"log.dirs": "/nonexistent-memory-only", "num.partitions": "1",
                              "group.initial.rebalance.delay.ms": "0",
                              "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                              "super.users": ADMIN}, environ={})
        broker = Broker(config, storage=MemoryStorage(config))
        broker.open()
        await broker.start()
        assert broker.authorizer is not None
        broker.authorizer.replace(frozenset(acls))
        request_context.client_host.set("/127.0.0.1")
        try:
            await scenario(broker)
        finally:
            await broker.close()

    asyncio.run(main())


async def call(principal: str, handler: Callable[..., Any], broker: Broker, api_key: int,
               version: int, request: object) -> Any:
    request_context.principal.set(principal)
    result = handler(broker, RequestHeader(api_key, version, 1, "unit"), request)
    return await result if inspect.isawaitable(result) else result


def topics_request(*names: str) -> CreateTopicsRequest:
    return CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=1, replication_factor=1, assignments=[], configs=[])
        for name in names], timeout_ms=5000, validate_only=False)
