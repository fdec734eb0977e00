"""A structure-aware network fuzzer against a running server, a healthy client alongside.

tests/helpers/fuzz/netfuzz.py mutates real client requests on 16 connections for
``FUZZ_NET_SECONDS`` (default 8): Produce into the healthy client's own topic with
CRC-valid broken batches and decompression bombs of every codec, Fetch/Metadata/group
requests with mutated fields, and byte-mutated frames. Meanwhile a healthy client
(tests/helpers/fuzz/healthy.py: kafka-python producing, confluent-kafka consuming) uses that topic. Asserted: every record the healthy
client had acknowledged reaches its consumer and it sees no error; no batch that must be
refused was acknowledged; the server is up, answers, logged no traceback, and its RSS
stayed under ``RSS_LIMIT_MB``. benchmarks/fuzz_network.py is the long, measured run.
"""

from __future__ import annotations

import os

import pytest
from helpers.clienthelpers import create_topic
from helpers.fuzz.netsession import session
from helpers.rawwire import api_versions_ok

pytestmark = [pytest.mark.timeout(300)]

SECONDS = float(os.environ.get("FUZZ_NET_SECONDS", "8"))
SEED = int(os.environ.get("FUZZ_SEED", "1"))
TOPIC = "healthy"
PARTITIONS = 3
#: The server starts near 60 MB; bombs are capped at message.max.bytes (1 MiB) each.
RSS_LIMIT_MB = 400


def test_network_fuzzer_beside_a_healthy_client(server, record_property):
    create_topic(server.bootstrap, TOPIC, PARTITIONS)
    result = session(server.pid, server.port, TOPIC, PARTITIONS, SECONDS, fuzz=True, seed=SEED)
    record_property("network_fuzz", result.to_json())
    print(result.to_json())
    fuzzer = result.fuzzer
    assert fuzzer is not None, result.fuzzer_output
    assert fuzzer["frames_total"] > 500, fuzzer
    assert sum(fuzzer["produce_errors"].values()) > 100, fuzzer  # batches reached the walk
    assert fuzzer["accepted_invalid"] == {}, "the broker acknowledged batches it must refuse"
    healthy = result.healthy
    assert healthy.errors == [], healthy.errors
    assert healthy.produced > 0 and healthy.missing == 0, healthy.to_json()
    assert server.running and api_versions_ok(server.port)
    assert result.peak_rss_mb < RSS_LIMIT_MB, result.to_json()
    log = server.log_path.read_text(errors="replace")
    assert "Traceback" not in log, log[log.index("Traceback") - 2000:][:6000]
