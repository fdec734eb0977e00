"""The REST Proxy's listeners: https:// with the Kafka listeners' ssl.* settings (requests
verifying against a test CA), and the Host check (DNS rebinding) on a loopback listener."""

from __future__ import annotations

import json

import pytest
import requests
from helpers.clienthelpers import create_topic, kp_read
from helpers.kafkasec import Pki, tls_settings
from helpers.serverproc import HOST, free_port, run_cli

pytestmark = pytest.mark.timeout(120)

JSON_V2 = "application/vnd.kafka.json.v2+json"


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    return Pki.make(tmp_path_factory.mktemp("pki"))


def test_https_listener_with_the_kafka_ssl_settings(server_factory, pki, topic_name) -> None:
    port = free_port()
    srv = server_factory(settings={"rest.proxy.listeners": f"https://{HOST}:{port}",
                                   **tls_settings(pki)})
    create_topic(srv.bootstrap, topic_name, 1)
    url = f"https://{HOST}:{port}/topics/{topic_name}"
    body = json.dumps({"records": [{"key": "dev-1", "value": {"t": 21.5}}]})
    answer = requests.post(url, data=body, headers={"Content-Type": JSON_V2},
                           verify=str(pki.ca.pem.cert), timeout=30)
    assert answer.status_code == 200, answer.text
    assert answer.json()["offsets"][0]["offset"] == 0
    # A client that does not trust the CA refuses the server; plain HTTP gets no answer.
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(f"https://{HOST}:{port}/topics", verify=str(pki.rogue_ca.pem.cert), timeout=30)
    with pytest.raises(requests.exceptions.ConnectionError):
        requests.get(f"http://{HOST}:{port}/topics", timeout=30)
    assert [r.value for r in kp_read(srv.bootstrap, topic_name)] == [b'{"t":21.5}']
    assert f"REST Proxy on https://{HOST}:{port}" in srv.log_path.read_text()


def test_https_listener_without_a_keystore_stops_start_up(tmp_path) -> None:
    proc = run_cli(["--log.dirs", str(tmp_path / "data"),
                    "--listeners", f"PLAINTEXT://{HOST}:{free_port()}",
                    "--rest.proxy.listeners", f"https://{HOST}:{free_port()}"])
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "rest.proxy.listeners" in proc.stderr and "ssl.keystore.location" in proc.stderr


def test_loopback_listener_refuses_other_host_names(server_factory) -> None:
    port = free_port()
    srv = server_factory(settings={"rest.proxy.listeners": f"http://{HOST}:{port}",
                                   "admin.allowed.hosts": "proxy.example"})
    url = f"http://{HOST}:{port}/topics"
    for host in (f"{HOST}:{port}", f"localhost:{port}", "proxy.example"):
        assert requests.get(url, headers={"Host": host}, timeout=30).status_code == 200, host
    rebound = requests.get(url, headers={"Host": f"attacker.example:{port}"}, timeout=30)
    assert rebound.status_code == 403
    assert rebound.json()["error_code"] == 40301
    assert srv.bootstrap  # the broker runs on
