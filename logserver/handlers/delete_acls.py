"""DeleteAcls: remove what each filter matches (ALTER on the cluster), in one atomic change;
each filter's answer lists the ACLs it removed. Without an authorizer: SECURITY_DISABLED."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING

from kafkaproto import ErrorCode, RequestHeader
from kafkaproto.messages import DeleteAclsRequest, DeleteAclsResponse
from logserver.cluster.errors import MetadataUnavailableError
from logserver.handlers.create_acls import NO_AUTHORIZER
from logserver.security import checks
from logserver.security.acl import AclBindingFilter, make_filter
from logserver.security.store import AclStore

if TYPE_CHECKING:
    from logserver.services import BrokerServices

FilterResult = DeleteAclsResponse.DeleteAclsFilterResult
Matching = DeleteAclsResponse.DeleteAclsMatchingAcl


def handle(broker: BrokerServices, header: RequestHeader, request: DeleteAclsRequest) -> (
        DeleteAclsResponse | Awaitable[DeleteAclsResponse]):
    if broker.acl_store is None:
        return _all(len(request.filters), ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
    if not checks.allowed(broker, checks.DELETE_ACLS):
        return _all(len(request.filters), ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
    filters = [make_filter(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter,
                           f.principal_filter, f.host_filter, f.operation, f.permission_type)
               for f in request.filters]
    return _delete(broker.acl_store, filters)


def _all(count: int, error: int, message: str | None) -> DeleteAclsResponse:
    return DeleteAclsResponse(throttle_time_ms=0, filter_results=[
        FilterResult(error_code=error, error_message=message, matching_acls=[])
        for _ in range(count)])


async def _delete(store: AclStore, filters: list[AclBindingFilter]) -> DeleteAclsResponse:
    try:
        results = await store.update(lambda authorizer: authorizer.plan_delete(filters))
    except MetadataUnavailableError as exc:  # cluster mode: etcd did not take it
        return DeleteAclsResponse(throttle_time_ms=0, filter_results=[
            FilterResult(error_code=ErrorCode.REQUEST_TIMED_OUT, error_message=str(exc),
                         matching_acls=[]) for _ in filters])
    return DeleteAclsResponse(throttle_time_ms=0, filter_results=[
        FilterResult(
            error_code=ErrorCode.NONE if r.error is None else ErrorCode.INVALID_REQUEST,
            error_message=r.error,
            matching_acls=[
                Matching(error_code=ErrorCode.NONE, error_message=None,
                         resource_type=a.resource_type, resource_name=a.resource_name,
                         pattern_type=a.pattern_type, principal=a.principal, host=a.host,
                         operation=a.operation, permission_type=a.permission)
                for a in r.deleted])
        for r in results])
