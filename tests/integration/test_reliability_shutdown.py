"""Graceful shutdown: SIGTERM stops accepting, finishes in-flight requests (a long-poll
fetch, an fsync-before-ack produce), flushes, writes the clean-shutdown marker, exits 0;
the next start trusts the log and runs no recovery."""

from __future__ import annotations

import os
import signal
import socket
import time

import pytest
from helpers.clienthelpers import ck_produce, kp_read
from helpers.rawwire import Conn, parse_produce_v3_response, produce_v3, record_batch, request
from helpers.serverproc import HOST

from kafkaproto import decode_response, encode_request
from kafkaproto.messages import FetchRequest

pytestmark = [pytest.mark.timeout(120)]


def test_sigterm_finishes_in_flight_and_next_start_needs_no_recovery(server_factory):
    server = server_factory(settings={"log.flush.interval.messages": 1, "num.partitions": 1})
    written = ck_produce(server.bootstrap, "calm", [{"value": b"v%d" % i} for i in range(500)])
    assert len(written) == 500

    poller = Conn(server.port)
    fetch = FetchRequest(replica_id=-1, max_wait_ms=1500, min_bytes=10**6, max_bytes=1 << 20,
                         isolation_level=0, session_id=0, session_epoch=-1, topics=[
                             FetchRequest.FetchTopic(topic="calm", partitions=[
                                 FetchRequest.FetchPartition(partition=0, fetch_offset=500,
                                                             partition_max_bytes=1 << 20)])],
                         forgotten_topics_data=[])
    poller.send(encode_request(1, 11, 7, "t", fetch))  # waits: min_bytes cannot be met
    producer = Conn(server.port)
    time.sleep(0.2)
    producer.send(request(0, 3, 8, produce_v3("calm", 0, record_batch([(None, b"last")]))))
    os.kill(server.pid, signal.SIGTERM)

    # the in-flight produce is acknowledged (after its fsync) ...
    produced = producer.recv_frame(timeout=10)
    assert produced is not None, "the in-flight produce was dropped"
    assert parse_produce_v3_response(produced[4:])[("calm", 0)] == (0, 500)
    # ... and the long-poll fetch is answered before the connection closes
    response = poller.recv_frame(timeout=10)
    assert response is not None, "the in-flight fetch was dropped"
    _, fetched = decode_response(1, 11, response)
    assert fetched.responses[0].partitions[0].error_code == 0
    # no new connections once shutdown began
    time.sleep(0.05)
    with pytest.raises(OSError):
        socket.create_connection((HOST, server.port), timeout=1).close()
    code = server.proc.wait(timeout=60)
    assert code == 0
    server.exit_codes.append(code)
    assert (server.data_dir / ".kafka_cleanshutdown").exists()

    server.start()
    out = server.output().split("===== start #2")[1]
    assert "no clean shutdown marker" not in out
    assert "recovered after unclean shutdown" not in out
    assert "start-up recovery repaired" not in out
    values = [r.value for r in sorted(kp_read(server.bootstrap, "calm"), key=lambda r: r.offset)]
    assert values == [b"v%d" % i for i in range(500)] + [b"last"]
