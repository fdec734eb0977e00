"""The REST Proxy v2 API of logserver (docs/rest-proxy.md) with real HTTP clients
(requests, curl) against a real server; records checked with kcat and kafka-python."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
import requests
from helpers.clienthelpers import (
    create_topic,
    kcat,
    kcat_json_records,
    kp_admin,
    kp_produce,
    kp_read,
)
from helpers.serverproc import HOST, ServerProcess, free_port, run_cli
from helpers.waiting import wait_until

pytestmark = pytest.mark.timeout(120)

JSON_V2 = "application/vnd.kafka.json.v2+json"
BINARY_V2 = "application/vnd.kafka.binary.v2+json"
V2 = "application/vnd.kafka.v2+json"


def rest_server(factory: Callable[..., ServerProcess], **settings: Any) -> ServerProcess:
    """A server with the REST Proxy on a free port of its own; ``srv.rest`` is its URL."""
    port = free_port()
    srv = factory(settings={"rest.proxy.listeners": f"http://{HOST}:{port}", **settings})
    srv.rest = f"http://{HOST}:{port}"  # type: ignore[attr-defined]
    return srv


@pytest.fixture(scope="module")
def proxy(request, tmp_path_factory) -> ServerProcess:
    base = tmp_path_factory.mktemp("rest-proxy")
    port = free_port()
    srv = ServerProcess(base / "data", settings={"rest.proxy.listeners": f"http://{HOST}:{port}",
                                                 "group.initial.rebalance.delay.ms": 0})
    request.addfinalizer(srv.stop)
    srv.start()
    srv.rest = f"http://{HOST}:{port}"  # type: ignore[attr-defined]
    return srv


@pytest.fixture
def session():
    with requests.Session() as s:  # keep-alive, as a webhook sender would
        yield s


def post(s: requests.Session, url: str, body: Any, content_type: str = JSON_V2) -> requests.Response:
    return s.post(url, data=json.dumps(body), headers={"Content-Type": content_type}, timeout=30)


# -- topics ---------------------------------------------------------------------------------

def test_topics_listed_and_described(proxy, session, topic_name) -> None:
    create_topic(proxy.bootstrap, topic_name, 3)
    names = session.get(f"{proxy.rest}/topics", timeout=30).json()
    assert topic_name in names and "__consumer_offsets" not in names
    topic = session.get(f"{proxy.rest}/topics/{topic_name}", timeout=30)
    assert topic.status_code == 200
    assert topic.headers["Content-Type"].startswith(V2)
    assert topic.json()["name"] == topic_name
    assert [p["partition"] for p in topic.json()["partitions"]] == [0, 1, 2]
    partitions = session.get(f"{proxy.rest}/topics/{topic_name}/partitions", timeout=30).json()
    assert [p["leader"] for p in partitions] == [1, 1, 1]
    one = session.get(f"{proxy.rest}/topics/{topic_name}/partitions/2", timeout=30).json()
    assert one["partition"] == 2 and one["replicas"][0]["in_sync"] is True


def test_unknown_topic_is_40401(proxy, session) -> None:
    for response in (session.get(f"{proxy.rest}/topics/no-such-topic", timeout=30),
                     post(session, f"{proxy.rest}/topics/no-such-topic", {"records": [{"value": 1}]})):
        assert response.status_code == 404
        assert response.json()["error_code"] == 40401


def test_unknown_partition_is_40402(proxy, session, topic_name) -> None:
    create_topic(proxy.bootstrap, topic_name, 2)
    for response in (
            session.get(f"{proxy.rest}/topics/{topic_name}/partitions/7", timeout=30),
            post(session, f"{proxy.rest}/topics/{topic_name}/partitions/2", {"records": [{"value": 1}]}),
            post(session, f"{proxy.rest}/topics/{topic_name}", {"records": [{"value": 1, "partition": 5}]}),
            session.get(f"{proxy.rest}/topics/{topic_name}/partitions/3/records?offset=0", timeout=30)):
        assert response.status_code == 404, response.text
        assert response.json()["error_code"] == 40402


# -- produce --------------------------------------------------------------------------------

def test_keyed_json_records_land_where_kafka_python_puts_them(proxy, session, topic_name,
                                                             kcat_bin) -> None:
    create_topic(proxy.bootstrap, topic_name, 5)
    twin = topic_name + "-kp"
    create_topic(proxy.bootstrap, twin, 5)
    devices = [f"device-{i}" for i in range(40)]
    body = {"records": [{"key": d, "value": {"n": i, "device": d}} for i, d in enumerate(devices)]}
    response = post(session, f"{proxy.rest}/topics/{topic_name}", body)
    assert response.status_code == 200, response.text
    assert response.headers["Content-Type"].startswith(V2)
    offsets = response.json()["offsets"]
    assert all(o["error_code"] is None for o in offsets)
    # The JSON format writes keys as JSON: the key bytes are "device-i" with quotes.
    keys = [json.dumps(d).encode() for d in devices]
    produced = kp_produce(proxy.bootstrap, twin, [{"key": k, "value": b"x"} for k in keys])
    assert [o["partition"] for o in offsets] == [r.partition for r in produced]
    assert len({o["partition"] for o in offsets}) > 1
    out = kcat(kcat_bin, proxy.bootstrap, "-C", "-t", topic_name, "-e", "-J", "-q")
    seen = {(r["partition"], r["offset"]): (r["key"], r["payload"]) for r in kcat_json_records(out.stdout)}
    assert len(seen) == len(devices)
    for i, o in enumerate(offsets):
        key, payload = seen[(o["partition"], o["offset"])]
        assert key == json.dumps(devices[i])
        assert json.loads(payload) == {"n": i, "device": devices[i]}


def test_binary_records_with_curl(proxy, topic_name) -> None:
    curl = shutil.which("curl")
    assert curl is not None
    create_topic(proxy.bootstrap, topic_name, 1)
    raw = bytes(range(256))
    body = {"records": [{"key": base64.b64encode(b"k1").decode(), "value": base64.b64encode(raw).decode()},
                        {"value": base64.b64encode(b"\x00tail").decode()}, {"key": "azI=", "value": None}]}
    proc = subprocess.run([curl, "-sS", "-X", "POST", "-H", f"Content-Type: {BINARY_V2}",
                           "--data-binary", json.dumps(body), f"{proxy.rest}/topics/{topic_name}"],
                          capture_output=True, timeout=30, check=True)
    answer = json.loads(proc.stdout)
    assert [(o["partition"], o["offset"]) for o in answer["offsets"]] == [(0, 0), (0, 1), (0, 2)]
    got = kp_read(proxy.bootstrap, topic_name)
    assert [(r.key, r.value) for r in got] == [(b"k1", raw), (None, b"\x00tail"), (b"k2", None)]


def test_keyless_records_spread_and_partition_url(proxy, session, topic_name) -> None:
    create_topic(proxy.bootstrap, topic_name, 3)
    spread = post(session, f"{proxy.rest}/topics/{topic_name}", {"records": [{"value": i} for i in range(6)]})
    assert sorted(o["partition"] for o in spread.json()["offsets"]) == [0, 0, 1, 1, 2, 2]
    fixed = post(session, f"{proxy.rest}/topics/{topic_name}/partitions/1",
                 {"records": [{"key": "a", "value": 1}, {"key": "b", "value": 2}]}, "application/json")
    assert fixed.status_code == 200
    assert [(o["partition"], o["offset"]) for o in fixed.json()["offsets"]] == [(1, 2), (1, 3)]
    by_partition = {p: [r for r in kp_read(proxy.bootstrap, topic_name) if r.partition == p] for p in (0, 1, 2)}
    assert [r.value for r in by_partition[1]][2:] == [b"1", b"2"]
    assert all(len(records) == 2 for p, records in by_partition.items() if p != 1)


def test_bad_content_type_is_415(proxy, session, topic_name) -> None:
    create_topic(proxy.bootstrap, topic_name, 1)
    for content_type in ("text/plain", "application/vnd.kafka.avro.v2+json"):
        response = post(session, f"{proxy.rest}/topics/{topic_name}", {"records": [{"value": 1}]},
                        content_type)
        assert response.status_code == 415
        assert response.json()["error_code"] == 415


def test_unparsable_json_is_400_and_bad_records_422_with_nothing_written(proxy, session,
                                                                        topic_name) -> None:
    create_topic(proxy.bootstrap, topic_name, 1)
    url = f"{proxy.rest}/topics/{topic_name}"
    broken = session.post(url, data=b'{"records": [', headers={"Content-Type": JSON_V2}, timeout=30)
    assert broken.status_code == 400 and broken.json()["error_code"] == 400
    for body, content_type in (({"records": []}, JSON_V2), ({"value": 1}, JSON_V2),
                               ({"records": [{"value": "aGk="}, {"value": "not base64!"}]}, BINARY_V2),
                               ({"records": [{"value": 1}, {"value": 2, "partition": "x"}]}, JSON_V2)):
        response = post(session, url, body, content_type)
        assert response.status_code == 422, (body, response.text)
        assert response.json()["error_code"] == 422
    assert session.get(f"{url}/partitions/0/records?offset=0&timeout=0", timeout=30).json() == []
    assert post(session, url, {"records": [{"value": 1}]}).json()["offsets"][0]["offset"] == 0


def test_records_above_max_message_bytes_are_413_with_nothing_written(proxy, session,
                                                                      topic_name) -> None:
    from kafka.admin import NewTopic

    admin = kp_admin(proxy.bootstrap)
    try:
        admin.create_topics([NewTopic(topic_name, 2, 1, topic_configs={"max.message.bytes": "2000"})])
    finally:
        admin.close()
    url = f"{proxy.rest}/topics/{topic_name}"
    wait_until(lambda: session.get(url, timeout=30).status_code == 200, what="the topic")
    big = {"records": [{"value": "small", "partition": 0}, {"value": "x" * 5000, "partition": 1}]}
    response = post(session, url, big)
    assert response.status_code == 413, response.text
    assert response.json()["error_code"] == 413
    for p in (0, 1):
        assert session.get(f"{url}/partitions/{p}/records?offset=0&timeout=0", timeout=30).json() == []


def test_body_above_socket_request_max_bytes_is_413(server_factory, topic_name) -> None:
    srv = rest_server(server_factory, **{"socket.request.max.bytes": 100_000})
    create_topic(srv.bootstrap, topic_name, 1)
    url = f"{srv.rest}/topics/{topic_name}"  # type: ignore[attr-defined]
    with requests.Session() as s:
        response = post(s, url, {"records": [{"value": "x" * 150_000}]})
        assert response.status_code == 413, response.text
        assert response.json()["error_code"] == 413
        assert s.get(f"{url}/partitions/0/records?offset=0&timeout=0", timeout=30).json() == []
        assert post(s, url, {"records": [{"value": "small"}]}).status_code == 200


# -- records of one partition ---------------------------------------------------------------

def test_records_by_offset_binary_json_and_long_poll(proxy, session, topic_name) -> None:
    create_topic(proxy.bootstrap, topic_name, 1)
    kp_produce(proxy.bootstrap, topic_name, [{"key": b'"k"', "value": json.dumps({"i": i}).encode()}
                                             for i in range(5)])
    url = f"{proxy.rest}/topics/{topic_name}/partitions/0/records"
    binary = session.get(f"{url}?offset=2&timeout=1000", headers={"Accept": BINARY_V2}, timeout=30)
    assert binary.headers["Content-Type"].startswith(BINARY_V2)
    assert [(r["offset"], base64.b64decode(r["value"])) for r in binary.json()] == \
        [(i, json.dumps({"i": i}).encode()) for i in (2, 3, 4)]
    as_json = session.get(f"{url}?offset=0&max_bytes=1", headers={"Accept": JSON_V2}, timeout=30).json()
    # max_bytes=1: the first batch still (KIP-74), however many records the producer put in it
    assert as_json[0] == {"topic": topic_name, "key": "k", "value": {"i": 0}, "partition": 0,
                          "offset": 0}
    assert [r["offset"] for r in as_json] == list(range(len(as_json)))
    late: list[requests.Response] = []
    waiter = threading.Thread(target=lambda: late.append(requests.get(
        f"{url}?offset=5&timeout=20000", headers={"Accept": JSON_V2}, timeout=60)))
    started = time.monotonic()
    waiter.start()
    time.sleep(0.5)  # the GET is parked in its long poll (an empty answer would fail below)
    kp_produce(proxy.bootstrap, topic_name, [{"value": b'{"i": 5}'}])
    waiter.join(60)
    assert [r["value"] for r in late[0].json()] == [{"i": 5}]
    assert time.monotonic() - started < 15
    empty = session.get(f"{url}?offset=6&timeout=200", timeout=30)
    assert empty.status_code == 200 and empty.json() == []


# -- consumers ------------------------------------------------------------------------------

def consumer(s: requests.Session, base: str, group: str, **config: Any) -> str:
    response = post(s, f"{base}/consumers/{group}", config, V2)
    assert response.status_code == 200, response.text
    assert response.json()["base_uri"].endswith(f"/consumers/{group}/instances/{response.json()['instance_id']}")
    return str(response.json()["base_uri"])


def test_consumer_subscribes_reads_and_commits(proxy, session, topic_name) -> None:
    from kafka import KafkaConsumer, TopicPartition

    create_topic(proxy.bootstrap, topic_name, 2)
    post(session, f"{proxy.rest}/topics/{topic_name}", {"records": [{"key": i, "value": {"v": i}} for i in range(10)]})
    group = f"g-{topic_name}"
    uri = consumer(session, proxy.rest, group, name="c1", format="json", **{"auto.offset.reset": "earliest",
                                                                            "auto.commit.enable": "false"})
    assert post(session, f"{uri}/subscription", {"topics": [topic_name]}, V2).status_code == 204
    assert session.get(f"{uri}/subscription", timeout=30).json() == {"topics": [topic_name]}
    got: list[dict[str, Any]] = []
    wait_until(lambda: got.extend(session.get(f"{uri}/records?timeout=500", headers={"Accept": JSON_V2},
                                            timeout=30).json()) or len(got) >= 10, what="10 records")
    assert sorted(r["value"]["v"] for r in got) == list(range(10))
    assert post(session, f"{uri}/offsets", None, V2).status_code == 204  # all consumed
    wanted = {"partitions": [{"topic": topic_name, "partition": p} for p in (0, 1)]}
    committed = session.get(f"{uri}/offsets", data=json.dumps(wanted), headers={"Content-Type": V2}, timeout=30)
    ends = {p: 1 + max(r["offset"] for r in got if r["partition"] == p) for p in (0, 1)}
    assert {o["partition"]: o["offset"] for o in committed.json()["offsets"]} == ends
    kc = KafkaConsumer(bootstrap_servers=proxy.bootstrap, group_id=group, enable_auto_commit=False)
    try:
        assert {p: kc.committed(TopicPartition(topic_name, p)) for p in (0, 1)} == ends
    finally:
        kc.close()
    # A second instance of the group takes part of the partitions; no instance: 40403.
    other = consumer(session, proxy.rest, group, name="c2", format="json")
    assert post(session, f"{other}/subscription", {"topics": [topic_name]}, V2).status_code == 204

    def split() -> bool:  # the group rebalances: one partition each
        mine = session.get(f"{uri}/assignments", timeout=30).json()["partitions"]
        theirs = session.get(f"{other}/assignments", timeout=30).json()["partitions"]
        return sorted(p["partition"] for p in mine + theirs) == [0, 1] and len(mine) == 1

    wait_until(split, what="the two instances to split the partitions")
    assert session.delete(other, timeout=30).status_code == 204
    gone = session.get(f"{other}/records", timeout=30)
    assert gone.status_code == 404 and gone.json()["error_code"] == 40403
    again = post(session, f"{proxy.rest}/consumers/{group}", {"name": "c1"}, V2)
    assert again.status_code == 409 and again.json()["error_code"] == 40902


def test_consumer_assignments_and_positions(proxy, session, topic_name) -> None:
    create_topic(proxy.bootstrap, topic_name, 2)
    post(session, f"{proxy.rest}/topics/{topic_name}/partitions/1",
         {"records": [{"value": base64.b64encode(b"r%d" % i).decode()} for i in range(6)]}, BINARY_V2)
    uri = consumer(session, proxy.rest, f"g-{topic_name}", name="a")  # binary, latest
    tp = {"topic": topic_name, "partition": 1}
    assert post(session, f"{uri}/assignments", {"partitions": [tp]}, V2).status_code == 204
    assert session.get(f"{uri}/assignments", timeout=30).json() == {"partitions": [tp]}

    def read() -> list[bytes]:
        body = session.get(f"{uri}/records?timeout=300", headers={"Accept": BINARY_V2}, timeout=30).json()
        return [base64.b64decode(r["value"]) for r in body]

    assert read() == []  # latest: only what comes next
    assert post(session, f"{uri}/positions", {"offsets": [{**tp, "offset": 4}]}, V2).status_code == 204
    assert read() == [b"r4", b"r5"]
    assert post(session, f"{uri}/positions/beginning", {"partitions": [tp]}, V2).status_code == 204
    assert read() == [b"r%d" % i for i in range(6)]
    assert post(session, f"{uri}/positions/end", {"partitions": [tp]}, V2).status_code == 204
    assert read() == []
    missing = post(session, f"{proxy.rest}/consumers/g/instances/nobody/positions/end", {"partitions": [tp]}, V2)
    assert missing.status_code == 404 and missing.json()["error_code"] == 40403


def test_idle_consumer_instances_expire(server_factory, topic_name) -> None:
    srv = rest_server(server_factory, **{"consumer.instance.timeout.ms": 1000})
    with requests.Session() as s:
        uri = consumer(s, srv.rest, "g", name="idle")  # type: ignore[attr-defined]
        assert s.get(f"{uri}/assignments", timeout=30).status_code == 200
        # Asking about the instance would keep it alive: ask to create its name again
        # (409 while it lives), which does not touch it.
        again = f"{srv.rest}/consumers/g"  # type: ignore[attr-defined]
        assert post(s, again, {"name": "idle"}, V2).status_code == 409
        wait_until(lambda: post(s, again, {"name": "idle"}, V2).status_code == 200, what="expiry", timeout=20)


def test_default_test_servers_have_no_rest_listener(server) -> None:
    assert server.settings.get("rest.proxy.listeners") is None
    log = server.log_path.read_text()
    # Without the off default in tests/helpers/serverproc.py each would take (or fail to take) 8082.
    assert "admin API on" in log
    assert "REST Proxy on" not in log and "REST Proxy not served" not in log


# -- authentication and ACLs ----------------------------------------------------------------

def add_user(data_dir, user: str, password: str) -> None:
    secret = data_dir.parent / f"{user}.pw"
    secret.write_text(password + "\n")
    proc = run_cli(["scram", "add", "--data-dir", str(data_dir), "--user", user,
                    "--mechanism", "SCRAM-SHA-256", "--password-file", str(secret)])
    assert proc.returncode == 0, proc.stderr


def test_basic_auth_against_scram_users_and_acls(tmp_path, server_factory, topic_name) -> None:
    from kafka.admin import ACL, ACLOperation, ACLPermissionType, ResourcePattern, ResourceType

    data = tmp_path / "auth-data"
    add_user(data, "alice", "alice-secret")
    add_user(data, "bob", "bob-secret")
    srv = rest_server(lambda settings: server_factory(data_dir=data, settings=settings), **{
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS"})
    create_topic(srv.bootstrap, topic_name, 1)
    admin = kp_admin(srv.bootstrap)
    try:
        admin.create_acls([ACL("User:alice", "*", op, ACLPermissionType.ALLOW,
                               ResourcePattern(ResourceType.TOPIC, topic_name))
                           for op in (ACLOperation.WRITE, ACLOperation.DESCRIBE)])
    finally:
        admin.close()
    url = f"{srv.rest}/topics/{topic_name}"  # type: ignore[attr-defined]
    body = json.dumps({"records": [{"value": 1}]})
    headers = {"Content-Type": JSON_V2}
    anonymous = requests.post(url, data=body, headers=headers, timeout=30)
    assert anonymous.status_code == 401 and anonymous.json()["error_code"] == 40101
    assert anonymous.headers["WWW-Authenticate"].startswith("Basic")
    wrong = requests.post(url, data=body, headers=headers, auth=("alice", "nope"), timeout=30)
    assert wrong.status_code == 401
    denied = requests.post(url, data=body, headers=headers, auth=("bob", "bob-secret"), timeout=30)
    assert denied.status_code == 403 and denied.json()["error_code"] == 40301
    ok = wait_until(lambda: (r := requests.post(url, data=body, headers=headers,
                                              auth=("alice", "alice-secret"), timeout=30)).status_code == 200 and r, what="alice's ACLs")
    assert ok.json()["offsets"][0]["offset"] == 0
    # A verified password is remembered for a minute; another password still is not taken.
    again = requests.post(url, data=body, headers=headers, auth=("alice", "alice-secreT"), timeout=30)
    assert again.status_code == 401
    cached = requests.post(url, data=body, headers=headers, auth=("alice", "alice-secret"), timeout=30)
    assert cached.json()["offsets"][0]["offset"] == 1
    assert requests.get(f"{srv.rest}/topics", auth=("bob", "bob-secret"), timeout=30).json() == []  # type: ignore[attr-defined]
    assert topic_name in requests.get(f"{srv.rest}/topics", auth=("alice", "alice-secret"),  # type: ignore[attr-defined]
                                      timeout=30).json()
    assert [r.value for r in kp_read(srv.bootstrap, topic_name)] == [b"1"] * 2


# -- cluster mode ---------------------------------------------------------------------------

@pytest.mark.slow
def test_cluster_produce_forwards_to_the_leaders(tmp_path, etcd, topic_name) -> None:
    """Each broker serves the API; records for partitions another broker leads are sent
    on to that leader and written there, each with its offset."""
    from helpers.clusterprocs import Cluster

    nodes = Cluster(tmp_path, etcd, 3, **{"default.replication.factor": 3})
    rest = {}
    for node, broker in nodes.brokers.items():
        rest[node] = f"http://{HOST}:{free_port()}"
        broker.settings["rest.proxy.listeners"] = rest[node]
    try:
        nodes.start()
        create_topic(nodes.bootstrap, topic_name, 6)
        url = f"{rest[1]}/topics/{topic_name}"

        def leaders() -> dict[int, int] | None:
            response = requests.get(f"{url}/partitions", timeout=30)
            found = {p["partition"]: p["leader"] for p in response.json()} if response.ok else {}
            return found if len(found) == 6 and -1 not in found.values() else None

        placed = wait_until(leaders, what="leaders of every partition")

        def serving() -> bool:  # each leader has taken its partitions (reads answer 200)
            return all(requests.get(f"{rest[n]}/topics/{topic_name}/partitions/{p}/records?offset=0"
                                    "&timeout=0", timeout=30).status_code == 200
                       for p, n in placed.items())

        wait_until(serving, what="leaders serving their partitions")
        assert set(placed.values()) == {1, 2, 3}  # one broker leads only some partitions
        with requests.Session() as s:
            body = {"records": [{"value": p, "partition": p} for p in range(6)]}
            offsets = post(s, url, body).json()["offsets"]
            # Through another broker too: the second record of each partition.
            again = post(s, f"{rest[2]}/topics/{topic_name}", body).json()["offsets"]
        for p in range(6):
            assert (offsets[p]["partition"], offsets[p]["offset"], offsets[p]["error_code"]) \
                == (p, 0, None), offsets[p]
            assert (again[p]["offset"], again[p]["error_code"]) == (1, None), again[p]
        got = kp_read(nodes.bootstrap, topic_name)
        assert sorted((r.partition, r.offset, r.value) for r in got) == sorted(
            (p, o, str(p).encode()) for p in range(6) for o in (0, 1))
    finally:
        nodes.stop()
