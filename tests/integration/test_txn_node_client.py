"""The transactional producer of the npm package @platformatic/kafka (tests/js) against a
real server: its InitProducerId for a transactional id the broker has never seen carries
producer id 0 and epoch 0, which Kafka accepts (fresh transaction metadata is valid for any
id and epoch presented); the committed records are read back by a read_committed consumer."""

from __future__ import annotations

import json

import pytest
from helpers.clienthelpers import ck_read, create_topic
from helpers.jsclient import run_node
from helpers.kafkaclient import BlockingClient

from kafkaproto import ApiKey, ErrorCode
from kafkaproto.messages import DescribeTransactionsRequest

pytestmark = pytest.mark.timeout(600)  # the first run installs the npm packages


def test_platformatic_transactional_producer_commits(server, topic_name):
    create_topic(server.bootstrap, topic_name, partitions=1)
    txn_id = f"node-{topic_name}"
    done = run_node("txn_producer.mjs", server.bootstrap, topic_name, txn_id, "3")
    lines = done.stdout.strip().splitlines()
    assert lines, f"no output from node ({done.returncode}): {done.stderr[-3000:]}"
    outcome = json.loads(lines[-1])
    assert outcome["ok"], f"@platformatic/kafka transaction failed: {outcome}\n{done.stderr[-3000:]}"
    assert done.returncode == 0, done.stderr[-3000:]

    records = ck_read(server.bootstrap, topic_name, [0], end={0: 3}, timeout=30,
                      **{"isolation.level": "read_committed"})
    assert [(r.offset, r.key, r.value) for r in records] == [
        (0, b"k0", b"v0"), (1, b"k1", b"v1"), (2, b"k2", b"v2")]

    client = BlockingClient(server.port, "node-txn-check", timeout=10)
    try:
        state = client.call(ApiKey.DESCRIBE_TRANSACTIONS, 0, DescribeTransactionsRequest(
            transactional_ids=[txn_id])).transaction_states[0]
    finally:
        client.close()
    assert (state.error_code, state.transaction_state) == (ErrorCode.NONE, "CompleteCommit")
