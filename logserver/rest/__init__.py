"""The Confluent REST Proxy v2 API served by the broker itself (docs/rest-proxy.md).

Requests run through the broker's own Kafka request handlers in-process (Produce,
ListOffsets, OffsetCommit, OffsetFetch) or its ACL checks, as the request's principal,
so validation, limits and authorization are those a Kafka client gets.
"""
