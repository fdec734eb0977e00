"""The per-peer connection helper (logserver/cluster/peer_links.py) against a real broker
process: requests to one broker share a kept connection, a request while another is in
flight opens a second one instead of waiting, a broker that stops is unreachable and
then backed off (a request within the backoff fails at once, without connecting), one
that is back is reached again, and nothing is left open or usable after ``close``.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from typing import Any

from helpers.clienthelpers import create_topic
from helpers.serverproc import HOST, ServerProcess
from helpers.waiting import wait_until

from kafkaproto import ApiKey
from kafkaproto.client import Backoff
from kafkaproto.messages import FetchRequest, ListGroupsRequest
from logserver.cluster.peer_links import PeerLinks, PeerUnreachable

LIST_GROUPS = (ApiKey.LIST_GROUPS, 4, ListGroupsRequest())


def open_connections(server: ServerProcess) -> int:
    with urllib.request.urlopen(server.admin_url + "/v1/connections", timeout=10) as response:
        return len(json.loads(response.read())["connections"])


async def settles(server: ServerProcess, count: int, what: str) -> None:
    await asyncio.to_thread(wait_until, lambda: open_connections(server) == count, 10, what)


def long_poll(topic: str) -> tuple[int, int, Any]:
    """A Fetch at the log end that waits up to 3 s for records that do not come."""
    return (ApiKey.FETCH, 12, FetchRequest(
        replica_id=-1, max_wait_ms=3000, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
        topics=[FetchRequest.FetchTopic(topic=topic, partitions=[FetchRequest.FetchPartition(
            partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])]))


def test_kept_connections_backoff_and_close(server: ServerProcess, topic_name: str) -> None:
    create_topic(server.bootstrap, topic_name, 1)
    address = (HOST, server.port)

    async def scenario() -> None:
        links = PeerLinks("peer-links-test", Backoff(30_000, 30_000))
        for _ in range(3):
            [answer] = await links.ask(address, [LIST_GROUPS], 10)
            assert answer.error_code == 0
        await settles(server, 1, "one kept connection for three requests")
        # A long poll holds one connection; a request meanwhile gets another at once.
        polling = asyncio.ensure_future(links.ask(address, [long_poll(topic_name)], 10))
        await asyncio.sleep(0.5)
        [listed] = await links.ask(address, [LIST_GROUPS], 10)
        assert listed.error_code == 0 and not polling.done()
        await polling
        await settles(server, 2, "two kept connections")

        await asyncio.to_thread(server.stop)
        reasons = []
        for _ in range(2):
            try:
                await links.ask(address, [LIST_GROUPS], 5)
            except PeerUnreachable as exc:
                reasons.append(str(exc))
            else:
                raise AssertionError("a stopped broker answered")
        assert "next try in" not in reasons[0] and "next try in" in reasons[1], reasons
        await links.close()

        await asyncio.to_thread(server.start)
        revived = PeerLinks("peer-links-test")
        [answer] = await revived.ask(address, [LIST_GROUPS], 10)
        assert answer.error_code == 0
        await settles(server, 1, "one kept connection to the restarted broker")
        await revived.close()
        await settles(server, 0, "the connection closed by close()")
        try:
            await revived.ask(address, [LIST_GROUPS], 5)
        except PeerUnreachable as exc:
            assert "shutting down" in str(exc)
        else:
            raise AssertionError("a closed PeerLinks sent a request")
    asyncio.run(scenario())
