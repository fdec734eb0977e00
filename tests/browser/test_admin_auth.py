"""admin.require.auth: the admin API and dashboard need HTTP basic credentials of a SCRAM
user; probes stay open; wrong passwords are refused and counted. Real server, aiohttp's
client, and Chromium (Playwright) answering the 401 challenge with credentials."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest
from helpers.kafkasec import add_user
from playwright.sync_api import sync_playwright

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def secured(server_factory, tmp_path):
    data = tmp_path / "data"
    add_user(data, "ops", "SCRAM-SHA-512", "ops-secret")
    return server_factory(data_dir=data, settings={"admin.require.auth": "true"})


def _get(url: str, auth: tuple[str, str] | None = None) -> tuple[int, dict[str, str]]:
    async def get() -> tuple[int, dict[str, str]]:
        basic = aiohttp.BasicAuth(*auth) if auth else None
        async with aiohttp.ClientSession() as session, session.get(url, auth=basic) as r:
            await r.read()
            return r.status, dict(r.headers)

    return asyncio.run(get())


@pytest.mark.parametrize("path", ["/v1/topics", "/v1/cluster", "/metrics", "/openapi.json", "/"])
def test_every_view_needs_credentials(secured, path):
    status, headers = _get(secured.admin_url + path)
    assert status == 401
    assert headers["WWW-Authenticate"].startswith('Basic realm="logserver admin"')
    assert _get(secured.admin_url + path, ("ops", "wrong"))[0] == 401
    assert _get(secured.admin_url + path, ("nobody", "ops-secret"))[0] == 401
    assert _get(secured.admin_url + path, ("ops", "ops-secret"))[0] == 200


def test_probes_stay_open(secured):
    assert _get(secured.admin_url + "/v1/status/live")[0] == 200
    assert _get(secured.admin_url + "/v1/status/ready")[0] == 200


def test_off_by_default(server):
    assert _get(server.admin_url + "/v1/topics")[0] == 200


def test_a_browser_with_credentials_gets_the_dashboard(secured):
    """Chromium answers the 401 challenge with the context's credentials (the 401 itself is
    checked with aiohttp above)."""
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium")
        try:
            user = browser.new_context(http_credentials={"username": "ops",
                                                         "password": "ops-secret"})
            page = user.new_page()
            assert page.goto(secured.admin_url + "/").status == 200
            assert page.goto(secured.admin_url + "/v1/topics").status == 200
        finally:
            browser.close()


def test_failed_logins_are_counted(secured):
    for _ in range(2):
        assert _get(secured.admin_url + "/v1/topics", ("ops", "wrong"))[0] == 401
    status, _ = _get(secured.admin_url + "/metrics", ("ops", "ops-secret"))
    assert status == 200

    async def metrics() -> str:
        async with aiohttp.ClientSession() as session, session.get(
                secured.admin_url + "/metrics", auth=aiohttp.BasicAuth("ops", "ops-secret")) as r:
            return await r.text()

    text = asyncio.run(metrics())
    line = [x for x in text.splitlines() if 'listener="ADMIN",reason="sasl"' in x]
    assert line and float(line[0].rsplit(" ", 1)[1]) == 2
