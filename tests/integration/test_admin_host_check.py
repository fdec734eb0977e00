"""The admin HTTP API answers only requests addressed to one of its own names, so a web
page cannot read it through a DNS name of its own pointed at 127.0.0.1 (DNS rebinding).
Real server, real HTTP requests (aiohttp's client sends the Host header we give it)."""

from __future__ import annotations

import asyncio
import socket

import aiohttp
import pytest

pytestmark = pytest.mark.timeout(60)


def _get(url: str, host: str | None) -> tuple[int, str]:
    async def get() -> tuple[int, str]:
        headers = {"Host": host} if host is not None else {}
        async with aiohttp.ClientSession() as session, session.get(url, headers=headers) as r:
            return r.status, await r.text()

    return asyncio.run(get())


@pytest.mark.parametrize("path", ["/v1/topics", "/metrics", "/", "/v1/status/ready"])
def test_a_foreign_host_name_is_refused_on_every_path(server, path):
    status, body = _get(server.admin_url + path, "rebind.attacker.example")
    assert status == 403, body
    assert "admin.allowed.hosts" in body


@pytest.mark.parametrize("host", [None, "127.0.0.1", "localhost", "LOCALHOST.", "[::1]"])
def test_own_names_and_addresses_are_served(server, host):
    port = server.admin_url.rsplit(":", 1)[1]
    status, _ = _get(server.admin_url + "/v1/topics",
                     host if host is None or host.startswith("[") else f"{host}:{port}")
    assert status == 200


def test_this_machines_name_is_served(server):
    status, _ = _get(server.admin_url + "/v1/topics", socket.gethostname())
    assert status == 200


def test_admin_allowed_hosts_adds_names(server_factory):
    srv = server_factory(settings={"admin.allowed.hosts": "admin.example.org, ops.example.org"})
    assert _get(srv.admin_url + "/v1/topics", "ops.example.org")[0] == 200
    assert _get(srv.admin_url + "/v1/topics", "other.example.org")[0] == 403
    everyone = server_factory(settings={"admin.allowed.hosts": "*"})
    assert _get(everyone.admin_url + "/v1/topics", "other.example.org")[0] == 200


def test_the_bridges_admin_api_refuses_a_foreign_host_name(server, tmp_path, request):
    from helpers.mqtt_procs import BridgeProcess

    from commonlib.childproc import HOST, free_port

    admin = free_port()
    bridge = BridgeProcess(server.bootstrap, tmp_path / "bridge.log", "--admin-listen",
                           f"{HOST}:{admin}")
    request.addfinalizer(bridge.stop)
    bridge.start()
    url = f"http://{HOST}:{admin}/v1/status"
    assert _get(url, "rebind.attacker.example")[0] == 403
    assert _get(url, f"{HOST}:{admin}")[0] == 200
