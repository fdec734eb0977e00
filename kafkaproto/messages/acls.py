"""ACL administration: DescribeAcls (29), CreateAcls (30), DeleteAcls (31).

v1 adds the resource pattern type (KIP-290: LITERAL/PREFIXED; before it every pattern is
LITERAL), v2 is the flexible encoding, v3 allows the USER resource type.
"""

from __future__ import annotations

from ..schema import F
from ..spec import api

# fmt: off

#: PatternType.LITERAL: what a v0 request, which has no pattern type field, means.
LITERAL_PATTERN = 3

DESCRIBE_ACLS = api(
    29,
    "DescribeAcls",
    "0-3",
    flexible="2+",
    request=(
        F("ResourceTypeFilter", "int8", "0+"),
        F("ResourceNameFilter", "string", "0+", nullable="0+"),
        F("PatternTypeFilter", "int8", "1+", default=LITERAL_PATTERN),
        F("PrincipalFilter", "string", "0+", nullable="0+"),
        F("HostFilter", "string", "0+", nullable="0+"),
        F("Operation", "int8", "0+"),
        F("PermissionType", "int8", "0+"),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "0+"),
        F("ErrorCode", "int16", "0+"),
        F("ErrorMessage", "string", "0+", nullable="0+", default=None),
        F(
            "Resources", "[]DescribeAclsResource", "0+",
            F("ResourceType", "int8", "0+"),
            F("ResourceName", "string", "0+"),
            F("PatternType", "int8", "1+", default=LITERAL_PATTERN),
            F(
                "Acls", "[]AclDescription", "0+",
                F("Principal", "string", "0+"),
                F("Host", "string", "0+"),
                F("Operation", "int8", "0+"),
                F("PermissionType", "int8", "0+"),
            ),
        ),
    ),
)

DescribeAclsRequest = DESCRIBE_ACLS.request
DescribeAclsResponse = DESCRIBE_ACLS.response

CREATE_ACLS = api(
    30,
    "CreateAcls",
    "0-3",
    flexible="2+",
    request=(
        F(
            "Creations", "[]AclCreation", "0+",
            F("ResourceType", "int8", "0+"),
            F("ResourceName", "string", "0+"),
            F("ResourcePatternType", "int8", "1+", default=LITERAL_PATTERN),
            F("Principal", "string", "0+"),
            F("Host", "string", "0+"),
            F("Operation", "int8", "0+"),
            F("PermissionType", "int8", "0+"),
        ),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "0+"),
        F(
            "Results", "[]AclCreationResult", "0+",
            F("ErrorCode", "int16", "0+"),
            F("ErrorMessage", "string", "0+", nullable="0+", default=None),
        ),
    ),
)

CreateAclsRequest = CREATE_ACLS.request
CreateAclsResponse = CREATE_ACLS.response

DELETE_ACLS = api(
    31,
    "DeleteAcls",
    "0-3",
    flexible="2+",
    request=(
        F(
            "Filters", "[]DeleteAclsFilter", "0+",
            F("ResourceTypeFilter", "int8", "0+"),
            F("ResourceNameFilter", "string", "0+", nullable="0+"),
            F("PatternTypeFilter", "int8", "1+", default=LITERAL_PATTERN),
            F("PrincipalFilter", "string", "0+", nullable="0+"),
            F("HostFilter", "string", "0+", nullable="0+"),
            F("Operation", "int8", "0+"),
            F("PermissionType", "int8", "0+"),
        ),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "0+"),
        F(
            "FilterResults", "[]DeleteAclsFilterResult", "0+",
            F("ErrorCode", "int16", "0+"),
            F("ErrorMessage", "string", "0+", nullable="0+", default=None),
            F(
                "MatchingAcls", "[]DeleteAclsMatchingAcl", "0+",
                F("ErrorCode", "int16", "0+"),
                F("ErrorMessage", "string", "0+", nullable="0+", default=None),
                F("ResourceType", "int8", "0+"),
                F("ResourceName", "string", "0+"),
                F("PatternType", "int8", "1+", default=LITERAL_PATTERN),
                F("Principal", "string", "0+"),
                F("Host", "string", "0+"),
                F("Operation", "int8", "0+"),
                F("PermissionType", "int8", "0+"),
            ),
        ),
    ),
)

DeleteAclsRequest = DELETE_ACLS.request
DeleteAclsResponse = DELETE_ACLS.response
