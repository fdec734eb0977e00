"""What an admin API request may see, by the Kafka ACLs (as the Kafka APIs decide it).

Without an authorizer everything is visible. With one, a request runs as its HTTP basic
user (``admin.require.auth``) or as ``User:ANONYMOUS``, from its address, and sees only the
topics and groups it has DESCRIBE on: lists leave the others out (as Metadata and
ListGroups do), a topic asked for by name answers 403 (TOPIC_AUTHORIZATION_FAILED), and a
group's offsets leave out the topics it may not describe.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from logserver.security.acl import AclOperation, ResourceType
from logserver.security.session import ANONYMOUS

if TYPE_CHECKING:
    from aiohttp import web

    from logserver.services import BrokerServices


class Visibility:
    def __init__(self, broker: BrokerServices, request: web.Request) -> None:
        self.authorizer = broker.authorizer
        self.principal: str = request.get("principal", ANONYMOUS)
        self.host = request.remote or ""

    def _may(self, resource: ResourceType, name: str) -> bool:
        return self.may(AclOperation.DESCRIBE, resource, name)

    def may(self, operation: AclOperation, resource: ResourceType, name: str) -> bool:
        """The console's other questions: READ a topic's records, DESCRIBE_CONFIGS."""
        return self.authorizer is None or self.authorizer.authorize(
            self.principal, self.host, operation, resource, name)

    def topic(self, name: str) -> bool:
        return self._may(ResourceType.TOPIC, name)

    def topics(self, listed: dict[str, Any]) -> dict[str, Any]:
        return {**listed, "topics": [t for t in listed["topics"] if self.topic(t["name"])]}

    def groups(self, groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
        visible = []
        for group in groups:
            if not self._may(ResourceType.GROUP, group["group_id"]):
                continue
            partitions = [p for p in group["partitions"] if self.topic(p["topic"])]
            visible.append({**group, "partitions": partitions,
                            "lag": sum(p["lag"] for p in partitions)})
        return visible
