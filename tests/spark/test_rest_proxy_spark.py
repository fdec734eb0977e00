"""Records posted over the REST Proxy, read by Spark's stock Kafka source: the webhook
case of docs/rest-proxy.md (uplink JSON keyed by device id) ends up as rows with the
key, value, partition and offset the proxy answered, and the headers it was given."""

from __future__ import annotations

import base64
import json

import pytest
import requests
from helpers.clienthelpers import create_topic
from helpers.serverproc import HOST, free_port
from helpers.spark_support import require_connector

pytestmark = pytest.mark.timeout(300)


def test_spark_kafka_source_reads_records_posted_over_rest(spark, server_factory,
                                                           topic_name) -> None:
    require_connector(spark)
    port = free_port()
    srv = server_factory(settings={"rest.proxy.listeners": f"http://{HOST}:{port}"})
    create_topic(srv.bootstrap, topic_name, 3)
    uplinks = [{"end_device_ids": {"device_id": f"dev-{i % 4}"}, "uplink_message": {"f_cnt": i}}
               for i in range(12)]
    body = {"records": [{"key": u["end_device_ids"]["device_id"], "value": u,
                         "headers": [{"name": "source", "value": base64.b64encode(b"webhook").decode()}]}
                        for u in uplinks]}
    answer = requests.post(f"http://{HOST}:{port}/topics/{topic_name}", data=json.dumps(body),
                           headers={"Content-Type": "application/vnd.kafka.json.v2+json"}, timeout=30)
    assert answer.status_code == 200, answer.text
    placed = {(o["partition"], o["offset"]): uplinks[i] for i, o in enumerate(answer.json()["offsets"])}
    rows = (spark.read.format("kafka").option("kafka.bootstrap.servers", srv.bootstrap)
            .option("subscribe", topic_name).option("includeHeaders", "true")
            .option("startingOffsets", "earliest").option("endingOffsets", "latest").load()
            .collect())
    assert len(rows) == 12
    for row in rows:
        uplink = placed[(row.partition, row.offset)]
        assert json.loads(row.value) == uplink
        assert json.loads(row.key) == uplink["end_device_ids"]["device_id"]
        assert [(h.key, bytes(h.value)) for h in row.headers] == [("source", b"webhook")]
    by_device = {json.loads(r.key): set() for r in rows}
    for r in rows:
        by_device[json.loads(r.key)].add(r.partition)
    assert all(len(parts) == 1 for parts in by_device.values())  # one device, one partition
