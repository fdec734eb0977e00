"""Who may connect, publish and subscribe: logins, connection rates, ACLs.

Authentication of a CONNECT (a password or a client certificate's common name, with
the failed-login backoff) and the per-topic verdicts of the ACL or the identity
binding. The downlink's MQTT topics are written by the log only: no client publishes
there, whatever the ACL says.
"""

from __future__ import annotations

import asyncio
import logging
import time

from commonlib.source_limits import ConnectionRate, LoginBackoff

from .acl import AclFile, Authorizer, Identity, IdentityBinding
from .auth import Credentials
from .codec import Connect, Reason, topic_matches
from .config import BridgeConfig
from .connection import Connection
from .mapping import Mapping
from .session import EMPTY_DICT
from .stats import Stats
from .tls import certificate_cn

log = logging.getLogger(__name__)


class Access:
    """Authentication and authorization, for the session and uplink components."""

    def __init__(self, config: BridgeConfig, mapping: Mapping, stats: Stats) -> None:
        self._config = config
        self._stats = stats
        self.credentials = Credentials.load(config.credentials_file) if config.credentials_file else None
        self.authorizer: Authorizer = (
            AclFile.load(config.acl_file) if config.acl_file
            else IdentityBinding([r.mqtt_topic for r in mapping.downlink])
        )
        self._downlink_filters = [r.mqtt_filter for r in mapping.downlink]
        self.connection_rate = ConnectionRate(config.max_connection_rate)
        self.login_backoff = LoginBackoff(config.failed_login_delay_ms / 1000,
                                          config.failed_login_delay_max_ms / 1000)

    def rate_allows(self, peer_host: str) -> bool:
        """One more connection from this address within ``--max-connection-rate``?"""
        return self.connection_rate.take(peer_host, time.monotonic())

    async def authenticate(self, conn: Connection, p: Connect) -> tuple[Reason | None, str | None]:
        """(refusal or None, the authenticated identity: username, certificate CN or None
        for anonymous)."""
        cfg = self._config
        username: str | None = None
        if cfg.use_identity_as_username and conn.tls:
            username = certificate_cn(conn.peer_certificate())
            if username is None:
                self._stats.denied_connect += 1
                log.warning("refusing %s: client certificate without a common name", conn.peer)
                return Reason.NOT_AUTHORIZED, None
        elif self.credentials is not None:
            wait = self.login_backoff.wait(conn.peer_host, time.monotonic())
            if wait > 0:
                await asyncio.sleep(wait)
            ok = await asyncio.to_thread(self.credentials.check, p.username, p.password)
            if ok:
                self.login_backoff.succeeded(conn.peer_host)
            else:
                self.login_backoff.failed(conn.peer_host, time.monotonic())
                self._stats.denied_connect += 1
                log.warning("bad credentials from %s (user %r)", conn.peer, p.username,
                            extra={"event": "denied_connect", "reason": "credentials"})
                return Reason.BAD_USER_NAME_OR_PASSWORD, None
            username = p.username
        elif not cfg.allow_anonymous:
            self._stats.denied_connect += 1
            return Reason.NOT_AUTHORIZED, None
        return None, username

    def may_publish_as(self, who: Identity, topic: str) -> bool:
        if any(topic_matches(f, topic) for f in self._downlink_filters):
            return False  # the downlink is written by the log only
        return self.authorizer.may_publish(who, topic)

    def may_subscribe_as(self, who: Identity, topic_filter: str) -> bool:
        return self.authorizer.may_subscribe(who, topic_filter)

    def may_publish(self, conn: Connection, topic: str) -> bool:
        """Is this connection allowed to publish to ``topic``? (Remembered per connection.)"""
        cache = conn.publish_verdicts
        try:
            return cache[topic]
        except KeyError:
            pass
        assert conn.identity is not None
        ok = self.may_publish_as(conn.identity, topic)
        if cache is EMPTY_DICT:
            cache = conn.publish_verdicts = {}
        elif len(cache) >= 256:
            cache.clear()
        cache[topic] = ok
        return ok

    def may_subscribe(self, conn: Connection, topic_filter: str) -> bool:
        assert conn.identity is not None
        return self.authorizer.may_subscribe(conn.identity, topic_filter)

    @property
    def login_failures(self) -> int:
        return self.login_backoff.failures_total

    @property
    def logins_delayed(self) -> int:
        return self.login_backoff.delayed_total
