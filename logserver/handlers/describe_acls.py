"""DescribeAcls: the ACLs a filter matches (DESCRIBE on the cluster), grouped by resource
pattern as Kafka answers. Without an authorizer: SECURITY_DISABLED."""

from __future__ import annotations

from itertools import groupby
from typing import TYPE_CHECKING

from kafkaproto import ErrorCode, RequestHeader
from kafkaproto.messages import DescribeAclsRequest, DescribeAclsResponse
from logserver.handlers.create_acls import NO_AUTHORIZER
from logserver.security import checks
from logserver.security.acl import filter_error, make_filter

if TYPE_CHECKING:
    from logserver.services import BrokerServices

Resource = DescribeAclsResponse.DescribeAclsResource
Description = DescribeAclsResponse.AclDescription


def handle(broker: BrokerServices, header: RequestHeader, request: DescribeAclsRequest) -> DescribeAclsResponse:
    authorizer = broker.authorizer
    if authorizer is None:
        return _error(ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
    if not checks.allowed(broker, checks.DESCRIBE_ACLS):
        return _error(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
    acl_filter = make_filter(request.resource_type_filter, request.resource_name_filter,
                             request.pattern_type_filter, request.principal_filter,
                             request.host_filter, request.operation, request.permission_type)
    invalid = filter_error(acl_filter)
    if invalid is not None:
        return _error(ErrorCode.INVALID_REQUEST, invalid)
    matched = authorizer.describe(acl_filter)  # sorted: one pattern's ACLs are adjacent
    resources = [
        Resource(resource_type=resource_type, resource_name=name, pattern_type=pattern_type,
                 acls=[Description(principal=a.principal, host=a.host, operation=a.operation,
                                   permission_type=a.permission) for a in acls])
        for (resource_type, name, pattern_type), acls in groupby(
            matched, key=lambda a: (a.resource_type, a.resource_name, a.pattern_type))]
    return DescribeAclsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
                                resources=resources)


def _error(code: int, message: str | None) -> DescribeAclsResponse:
    return DescribeAclsResponse(throttle_time_ms=0, error_code=code, error_message=message,
                                resources=[])
