"""The admin API's OpenAPI 3 document, as data (served at /openapi.json, tested with
schemathesis against the running server: every response must match it)."""

from __future__ import annotations

from typing import Any

_INT = {"type": "integer"}
_STR = {"type": "string"}
_BOOL = {"type": "boolean"}
_NUM = {"type": "number"}


def _obj(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "required": sorted(properties), "properties": properties,
            "additionalProperties": False}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


_ERROR = _json(_ref("Error"), "Not found")
_NOT_READY = _json(_ref("Error"), "The broker is still recovering its data directory")

SCHEMAS: dict[str, Any] = {
    "Error": _obj({"error": _STR}),
    "Broker": _obj({"node_id": _INT, "host": _STR, "port": _INT,
                    "listeners": {"type": "array", "items": _STR}}),
    "Cluster": _obj({"cluster_id": _STR, "controller_id": _INT,
                     "brokers": {"type": "array", "items": _ref("Broker")}}),
    "ClusterHealth": _obj({
        "is_healthy": _BOOL, "unhealthy_reasons": {"type": "array", "items": _STR},
        "controller_id": _INT, "all_nodes": {"type": "array", "items": _INT},
        "nodes_down": {"type": "array", "items": _INT},
        **{f"{kind}_partitions": {"type": "array", "items": {
            **_STR, "description": "topic/partition"}}
           for kind in ("leaderless", "under_replicated", "under_min_isr")},
        **{f"{kind}_count": _INT for kind in ("leaderless", "under_replicated",
                                             "under_min_isr")}}),
    "TopicSummary": _obj({"name": _STR, "internal": _BOOL, "partitions": _INT,
                          "size_bytes": _INT, "messages": _INT, "bytes_in": _INT,
                          "bytes_out": _INT}),
    "Topics": _obj({"topics": {"type": "array", "items": _ref("TopicSummary")}}),
    "Partition": _obj({"partition": _INT, "leader": _INT, "log_start_offset": _INT,
                       "log_end_offset": _INT, "high_watermark": _INT, "segment_count": _INT,
                       "size_bytes": _INT, "bytes_in": _INT, "messages_in": _INT,
                       "bytes_out": _INT}),
    "Topic": _obj({"name": _STR, "topic_id": _STR, "internal": _BOOL,
                   "partitions": {"type": "array", "items": _ref("Partition")},
                   "configs": {"type": "object", "additionalProperties": _STR}}),
    "GroupPartition": _obj({"topic": _STR, "partition": _INT, "committed_offset": _INT,
                            "high_watermark": _INT, "lag": _INT}),
    "Group": _obj({"group_id": _STR, "protocol_type": _STR, "state": _STR, "members": _INT,
                   "lag": _INT, "partitions": {"type": "array", "items": _ref("GroupPartition")}}),
    "Groups": _obj({"groups": {"type": "array", "items": _ref("Group")}}),
    "Connection": _obj({"peer": _STR, "idle_ms": _INT, "in_flight": _INT}),
    "Connections": _obj({"open": _INT,
                         "connections": {"type": "array", "items": _ref("Connection")}}),
    "ApiRequests": _obj({"count": _INT, "total_seconds": _NUM,
                         "waiting": {**_INT, "description": "Delayed requests waiting now "
                                     "(a Produce for its fsync or the ISR, a long-poll Fetch)"},
                         "per_second_10s": {**_NUM, "description": "Over the last 10 s"},
                         "per_second_1m": {**_NUM, "description": "Over the last minute"}}),
    "Requests": _obj({"total": _INT, "protocol_errors": _INT,
                      "apis": {"type": "object", "additionalProperties": _ref("ApiRequests")}}),
    "Status": _obj({"ready": _BOOL, "recovering": _BOOL, "stopping": _BOOL,
                    "uptime_seconds": _NUM}),
}


def _get(summary: str, ok: dict[str, Any], *, needs_broker: bool = True,
         parameters: list[dict[str, Any]] | None = None,
         extra: dict[str, Any] | None = None) -> dict[str, Any]:
    responses: dict[str, Any] = {"200": ok}
    if needs_broker:
        responses["503"] = _NOT_READY
    responses.update(extra or {})
    operation: dict[str, Any] = {"summary": summary, "responses": responses}
    if parameters:
        operation["parameters"] = parameters
    return {"get": operation}


PATHS: dict[str, Any] = {
    "/v1/cluster": _get("The cluster and its brokers", _json(_ref("Cluster"), "Cluster")),
    "/v1/cluster/health": _get(
        "Healthy or not, and why: nodes down, leaderless, under-replicated and "
        "under-min-ISR partitions (rpk cluster health)",
        _json(_ref("ClusterHealth"), "ClusterHealth")),
    "/v1/topics": _get("Every topic with its size and traffic", _json(_ref("Topics"), "Topics")),
    "/v1/topics/{name}": _get(
        "One topic's partitions: offsets, segments, size on disk",
        _json(_ref("Topic"), "Topic"),
        parameters=[{"name": "name", "in": "path", "required": True, "schema": _STR}],
        extra={"404": _ERROR}),
    "/v1/groups": _get("Consumer groups with their lag", _json(_ref("Groups"), "Groups")),
    "/v1/connections": _get("Open client connections", _json(_ref("Connections"), "Connections"),
                            needs_broker=False),
    "/v1/requests": _get("Requests per API: totals, waiting now, recent rates",
                         _json(_ref("Requests"), "Requests"),
                         needs_broker=False),
    "/v1/status/live": _get("The process serves HTTP", _json(_ref("Status"), "Live"),
                            needs_broker=False),
    "/v1/status/ready": {"get": {
        "summary": "Recovery done and the Kafka listeners serving",
        "responses": {"200": _json(_ref("Status"), "Ready"),
                      "503": _json(_ref("Status"), "Not ready (recovering or stopping)")}}},
    "/metrics": {"get": {
        "summary": "Prometheus metrics (text exposition format)",
        "responses": {"200": {"description": "Metrics",
                              "content": {"text/plain": {"schema": _STR}}}}}},
}

DOCUMENT: dict[str, Any] = {
    "openapi": "3.0.3",
    "info": {"title": "logserver admin API", "version": "1",
             "description": "Read-only view of one logserver broker (JSON) and its metrics."},
    "paths": PATHS,
    "components": {"schemas": SCHEMAS},
}
