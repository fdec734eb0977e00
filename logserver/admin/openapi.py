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


_SHOWN = _obj({"size": _INT, "format": {"type": "string", "enum": ["json", "text", "hex"]},
               "truncated": _BOOL, "data": _STR})
_NULLABLE_SHOWN = {**_SHOWN, "nullable": True}  # a null key or value
_PARTITION_HEALTH = _obj({
    "topic": _STR, "partition": _INT, "leader": _INT,
    "replicas": {"type": "array", "items": _INT}, "isr": {"type": "array", "items": _INT},
    "offline_replicas": {"type": "array", "items": _INT}, "offline": _BOOL,
    "under_replicated": _BOOL, "log_start_offset": _INT, "high_watermark": _INT})
CONSOLE_SCHEMAS: dict[str, Any] = {
    "ClusterTopic": _obj({"name": _STR, "internal": _BOOL, "messages": _INT,
                          "messages_in_per_second": _NUM,
                          "under_replicated_partitions": _INT, "offline_partitions": _INT,
                          "partitions": {"type": "array", "items": _PARTITION_HEALTH}}),
    "ClusterTopics": _obj({"topics": {"type": "array", "items": _ref("ClusterTopic")}}),
    "Record": _obj({"offset": _INT, "timestamp": _INT, "key": _NULLABLE_SHOWN,
                    "value": _NULLABLE_SHOWN, "headers": {"type": "array", "items": _obj(
                        {"key": _STR, "value": _NULLABLE_SHOWN})}}),
    "Records": _obj({"topic": _STR, "partition": _INT, "start_offset": _INT,
                     "next_offset": _INT, "log_start_offset": _INT, "high_watermark": _INT,
                     "records": {"type": "array", "items": _ref("Record")}}),
    "Configs": _obj({"resource_type": {"type": "string", "enum": ["topic", "broker"]},
                     "name": _STR, "configs": {"type": "array", "items": _obj({
                         "name": _STR, "value": {**_STR, "nullable": True},
                         "read_only": _BOOL, "sensitive": _BOOL, "source": _STR})}}),
    "Acls": _obj({"authorizer": _BOOL, "acls": {"type": "array", "items": _obj({
        "resourceType": _STR, "resourceName": _STR, "patternType": _STR, "principal": _STR,
        "host": _STR, "operation": _STR, "permissionType": _STR})}}),
}
_RATES = _obj({"bytes_in_per_second": _NUM, "bytes_out_per_second": _NUM})
_BY_TOPIC = {"type": "object", "additionalProperties": _RATES}
_OWN_RATES = {"window_seconds": _INT, "topics": _BY_TOPIC, "bytes_in_per_second": _NUM,
              "bytes_out_per_second": _NUM}
THROUGHPUT_SCHEMAS: dict[str, Any] = {
    "OwnThroughput": _obj(_OWN_RATES),
    # a broker that did not answer has ``error`` and no rates (but an empty ``topics``)
    "BrokerThroughput": {"type": "object", "required": ["node_id", "state", "reachable"],
                         "additionalProperties": False, "properties": {
                             "node_id": _INT, "state": {"type": "string",
                                                        "enum": ["alive", "down"]},
                             "reachable": _BOOL, "error": _STR, **_OWN_RATES}},
    "ClusterThroughput": _obj({"window_seconds": _INT, "topics": _BY_TOPIC, "brokers": {
        "type": "array", "items": _ref("BrokerThroughput")}}),
}
_NAME = {"name": "name", "in": "path", "required": True, "schema": _STR}


def _query(name: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "schema": schema,
            "description": description}


def _errors(*codes: int) -> dict[str, Any]:
    return {str(code): _json(_ref("Error"), "Refused or unavailable") for code in codes}


CONSOLE_PATHS: dict[str, Any] = {
    "/v1/cluster/topics": {"get": {
        "summary": "Every topic of the cluster: partition health and offsets from the "
                   "leaders, messages per second summed over the leaders",
        "responses": {"200": _json(_ref("ClusterTopics"), "Topics"), **_errors(503)}}},
    "/v1/topics/{name}/records": {"get": {
        "summary": "A page of one partition's records from an offset or a timestamp",
        "parameters": [
            _NAME, _query("partition", {**_INT, "minimum": 0, "maximum": 2**31 - 1}, "Partition (default 0)"),
            _query("offset", {**_INT, "minimum": 0, "maximum": 2**63 - 1},
                   "First offset (default: the log start; below it: the log start)"),
            _query("timestamp", {**_INT, "minimum": 0, "maximum": 2**63 - 1},
                   "Else the first record at or after this time (ms)"),
            _query("limit", {**_INT, "minimum": 1, "maximum": 500},
                   "Records on the page (default 20)"),
            _query("max_value_bytes", {**_INT, "minimum": 0, "maximum": 1 << 20},
                   "Bytes shown of each key and value (default 4096)"),
            _query("format", {"type": "string", "enum": ["auto", "json", "text", "hex"]},
                   "How keys and values are shown")],
        "responses": {"200": _json(_ref("Records"), "Records"),
                      **_errors(400, 403, 404, 502, 503)}}},
    "/v1/topics/{name}/configs": {"get": {
        "summary": "A topic's configs (DescribeConfigs)", "parameters": [_NAME],
        "responses": {"200": _json(_ref("Configs"), "Configs"),
                      **_errors(403, 404, 502, 503)}}},
    "/v1/brokers/{node_id}/configs": {"get": {
        "summary": "A broker's configs, from that broker (DescribeConfigs)",
        "parameters": [{"name": "node_id", "in": "path", "required": True,
                        "schema": {**_INT, "minimum": 0, "maximum": 2**31 - 1}}],
        "responses": {"200": _json(_ref("Configs"), "Configs"),
                      **_errors(400, 403, 404, 502, 503)}}},
    "/v1/acls": {"get": {
        "summary": "Every ACL binding", "responses": {"200": _json(_ref("Acls"), "ACLs"),
                                                      **_errors(403, 503)}}},
}

SCHEMAS: dict[str, Any] = {
    "Error": _obj({"error": _STR}),
    "Broker": _obj({"node_id": _INT, "host": _STR,
                    "port": {**_INT, "description": "-1 for a down broker never seen here"},
                    "listeners": {"type": "array", "items": _STR},
                    "state": {"type": "string", "enum": ["alive", "down"]},
                    "controller": _BOOL}),
    "Cluster": _obj({"cluster_id": _STR, "controller_id": _INT,
                     "mode": {"type": "string", "enum": ["single", "cluster"]},
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
                   "lag": _INT, "coordinator": _INT, "partitions": {"type": "array", "items": _ref("GroupPartition")}}),
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
    **CONSOLE_SCHEMAS,
    **THROUGHPUT_SCHEMAS,
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
    "/v1/groups": _get("Every consumer group of the cluster with its lag per partition, "
                       "whichever broker coordinates it", _json(_ref("Groups"), "Groups")),
    **CONSOLE_PATHS,
    "/v1/cluster/throughput": _get(
        "Bytes in/out per second of every broker, total and per topic, as each reports "
        "its own; a broker that does not answer is listed as unreachable",
        _json(_ref("ClusterThroughput"), "ClusterThroughput")),
    "/v1/broker/throughput": _get(
        "This broker's own bytes in/out per second, total and per topic (last 10 s)",
        _json(_ref("OwnThroughput"), "OwnThroughput"), needs_broker=False),
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
