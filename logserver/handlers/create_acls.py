"""CreateAcls: add ACLs (ALTER on the cluster); the answer comes once they are on disk.

Each creation is answered on its own: an invalid one gets INVALID_REQUEST and a message,
the valid ones of the same request are all added in one atomic change. Without an
authorizer every creation gets SECURITY_DISABLED, as in Kafka.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING

from kafkaproto import ErrorCode, RequestHeader
from kafkaproto.messages import CreateAclsRequest, CreateAclsResponse
from logserver.cluster.errors import MetadataUnavailableError
from logserver.security import checks
from logserver.security.acl import AclBinding, make_binding
from logserver.security.store import AclStore

if TYPE_CHECKING:
    from logserver.services import BrokerServices

Result = CreateAclsResponse.AclCreationResult
NO_AUTHORIZER = "no authorizer is configured (authorizer.class.name)"


def handle(broker: BrokerServices, header: RequestHeader, request: CreateAclsRequest) -> (
        CreateAclsResponse | Awaitable[CreateAclsResponse]):
    count = len(request.creations)
    if broker.acl_store is None:
        return _all(count, ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
    if not checks.allowed(broker, checks.CREATE_ACLS):
        return _all(count, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
    bindings = [make_binding(c.resource_type, c.resource_name, c.resource_pattern_type,
                             c.principal, c.host, c.operation, c.permission_type)
                for c in request.creations]
    return _create(broker.acl_store, bindings)


def _all(count: int, error: int, message: str | None) -> CreateAclsResponse:
    return CreateAclsResponse(throttle_time_ms=0, results=[
        Result(error_code=error, error_message=message) for _ in range(count)])


async def _create(store: AclStore, bindings: list[AclBinding]) -> CreateAclsResponse:
    try:
        errors = await store.update(lambda authorizer: authorizer.plan_create(bindings))
    except MetadataUnavailableError as exc:  # cluster mode: etcd did not take them
        return _all(len(bindings), ErrorCode.REQUEST_TIMED_OUT, str(exc))
    return CreateAclsResponse(throttle_time_ms=0, results=[
        Result(error_code=ErrorCode.NONE if error is None else ErrorCode.INVALID_REQUEST,
               error_message=error)
        for error in errors])
