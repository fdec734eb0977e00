"""Thin glue over the aetcd client: a lease kept alive, compare-and-swap puts, a watch.

Everything the cluster decides is one of three etcd transactions: create a key that
must not exist (registration, controller election, topic creation), replace a key
only if its mod revision is the one we read (partition state), or plain reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, TypeVar

import aetcd

from kafkaproto.client import Backoff

log = logging.getLogger(__name__)

T = TypeVar("T")
# gRPC backs reconnection off for up to two minutes, in a subchannel pool shared by every
# channel of the process: a broker must be back on etcd within a second of its return.
GRPC_OPTIONS = {
    "grpc.use_local_subchannel_pool": 1,
    "grpc.initial_reconnect_backoff_ms": 100,
    "grpc.min_reconnect_backoff_ms": 100,
    "grpc.max_reconnect_backoff_ms": 1000,
}
#: The etcd retry loops (connect, register again, a broken watch, a failed reconcile or
#: topic creation): the project's one Backoff, as gRPC's reconnects above.
ETCD_BACKOFF = Backoff(100, 1000)
Entry = tuple[bytes, bytes | None, int]  # key, value (None: deleted), mod revision
# Our own deadline on every etcd call: aetcd's timeout is a gRPC deadline on unary calls
# only, and its watcher awaits a bounded request queue and a lock with none (a watch
# stream stuck after etcd came back once hung a broker's session and watch for good).
CALL_TIMEOUT_S = 10.0
CLOSE_TIMEOUT_S = 2.0
# What a call on a broken or stuck channel raises: the channel is then replaced.
CHANNEL_ERRORS = (aetcd.ConnectionFailedError, aetcd.ConnectionTimeoutError,
                  aetcd.WatchTimeoutError, TimeoutError)


def parse_endpoints(text: str) -> list[tuple[str, int]]:
    out = []
    for item in filter(None, (p.strip() for p in text.split(","))):
        item = item.removeprefix("http://")
        host, _, port = item.rpartition(":")
        out.append((host or "127.0.0.1", int(port)))
    if not out:
        raise ValueError("cluster.etcd.endpoints names no endpoint")
    return out


class EtcdStore:
    """One etcd client session; the lease is this broker's liveness."""

    def __init__(self, endpoints: Sequence[tuple[str, int]]) -> None:
        self.endpoints = list(endpoints)
        self.client: Any = None
        self.lease_id = 0
        # When the last successful grant or keepalive of the lease was sent (monotonic):
        # etcd counts the TTL from when it received that request, so the lease cannot
        # have outlived this + TTL at etcd either.
        self.renewed_at = 0.0
        self._stray: set[asyncio.Task[Any]] = set()  # renewals outlived by their verdict
        self._reconnecting = asyncio.Lock()
        # Called once a new channel replaced the old one: a watch stream on the old one
        # may never hear that it closed (gRPC cancels it; aetcd then delivers nothing).
        self.on_new_channel: Callable[[], None] | None = None

    async def connect(self) -> None:
        last: Exception | None = None
        for host, port in self.endpoints:
            client = aetcd.Client(host=host, port=port, timeout=5, options=GRPC_OPTIONS)
            try:
                # Bounded here too: a status call on a channel stuck connecting was seen
                # to outlive its gRPC deadline, holding up every reconnection after it.
                await bounded(client.connect(), CALL_TIMEOUT_S)
                await bounded(client.status(), CALL_TIMEOUT_S)
            except Exception as exc:  # try the next endpoint
                last = exc
                await discard(client)
                continue
            except BaseException:  # cancelled (a bounded keepalive): leave no channel open
                with contextlib.suppress(Exception):
                    await discard(client)
                raise
            self.client = client
            return
        raise ConnectionError(f"no etcd endpoint answered: {last}")

    async def close(self) -> None:
        if self.client is not None:
            await discard(self.client)

    async def reconnect(self, failed: Any = None) -> None:
        """A new channel: gRPC's own reconnection backs off for up to minutes after etcd
        was down, far longer than a broker session. ``failed``: the client a call failed
        on; if another caller replaced it meanwhile, that new one is kept."""
        async with self._reconnecting:
            if failed is not None and self.client is not failed:
                return
            old = self.client
            await bounded(self.connect(), CALL_TIMEOUT_S * (len(self.endpoints) + 1))
            log.info("etcd: new channel to %s", self.endpoints)
        if old is not None:
            await discard(old)
            if self.on_new_channel is not None:
                self.on_new_channel()

    async def _call(self, operation: Callable[[Any], Awaitable[T]], *,
                    timeout: float | None = CALL_TIMEOUT_S) -> T:
        """``operation(client)`` within ``timeout``; on a broken or stuck channel a fresh
        one replaces it, and the operation is tried once more there if etcd said it was
        unreachable (a timed-out call may have been applied: the caller decides)."""
        client = self.client
        try:
            return await bounded(operation(client), timeout)
        except CHANNEL_ERRORS as exc:
            await self.reconnect(client)
            if not isinstance(exc, aetcd.ConnectionFailedError):
                raise
        return await bounded(operation(self.client), timeout)

    # -- lease ----------------------------------------------------------------------------

    async def grant_lease(self, ttl_s: int) -> int:
        sent = time.monotonic()
        lease = await self._call(lambda c: c.lease(ttl_s))
        self.lease_id = int(lease.id)
        self.renewed_at = sent
        return self.lease_id

    async def keep_alive(self, ttl_s: float, on_lost: Callable[[], None]) -> None:
        """Refresh the lease a few times per TTL; ``on_lost()`` once it may have expired.

        That is when etcd says so, and also when no renewal succeeded for a whole TTL
        (etcd unreachable, or not answering): by then etcd may have expired the lease
        and another broker may lead our partitions, so this broker must not wait to hear
        it (it may never hear it while cut off). Measured from the last successful
        renewal on the monotonic clock; a renewal hanging on a dead connection does not
        delay the verdict (it is left to end by its own gRPC deadline, not cancelled:
        cancelling a gRPC stream call mid-way leaves gRPC's request task pending)."""
        refreshing: asyncio.Task[Any] | None = None
        sent = 0.0
        try:
            while True:
                left = self.renewed_at + ttl_s - time.monotonic()
                if left <= 0:
                    log.error("etcd lease %x not renewed for %.1f s (session timeout %.0f s): "
                              "this broker's session is lost", self.lease_id,
                              time.monotonic() - self.renewed_at, ttl_s)
                    on_lost()
                    return
                if refreshing is None:
                    await asyncio.sleep(min(ttl_s / 4, left))
                    if self.renewed_at + ttl_s <= time.monotonic():
                        continue
                    sent = time.monotonic()
                    refreshing = asyncio.get_running_loop().create_task(
                        self._refresh(self.lease_id))
                left = self.renewed_at + ttl_s - time.monotonic()
                await asyncio.wait({refreshing}, timeout=max(0.0, left))
                if not refreshing.done():
                    continue  # past the TTL now: the verdict above
                task, refreshing = refreshing, None
                try:
                    reply = task.result()
                except Exception as exc:
                    log.warning("refreshing etcd lease %x failed: %s", self.lease_id, exc)
                    continue
                if reply is None or reply.TTL <= 0:
                    log.error("etcd lease %x expired: this broker's session is lost", self.lease_id)
                    on_lost()
                    return
                self.renewed_at = sent
        finally:
            if refreshing is not None and not refreshing.done():
                self._stray.add(refreshing)  # kept until it ends on its own
                refreshing.add_done_callback(self._stray_done)

    async def _refresh(self, lease_id: int) -> Any:
        # Bounded by gRPC's own deadline: cancelling the keep-alive stream mid-way would
        # leave gRPC's request task pending.
        return await self._call(lambda c: c.refresh_lease(lease_id), timeout=None)

    def _stray_done(self, task: asyncio.Task[Any]) -> None:
        self._stray.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: a failed renewal nobody waits for any more

    async def revoke(self) -> None:
        if self.lease_id:
            await self._call(lambda c: c.revoke_lease(self.lease_id))
            self.lease_id = 0

    # -- transactions ---------------------------------------------------------------------

    async def create(self, puts: Sequence[tuple[bytes, bytes]], *, leased: bool = False) -> bool:
        """Put every key, all or none, only if none of them exists yet."""
        tx = self.client.transactions
        lease = self.lease_id if leased else None
        ok, _ = await self._call(lambda c: c.transaction(
            compare=[tx.create(key) == 0 for key, _ in puts],
            success=[tx.put(key, value, lease=lease) for key, value in puts], failure=[]))
        return bool(ok)

    async def swap(self, key: bytes, value: bytes, mod_revision: int) -> bool:
        """Replace ``key`` only if nobody changed it since ``mod_revision``."""
        tx = self.client.transactions
        ok, _ = await self._call(lambda c: c.transaction(
            compare=[tx.mod(key) == mod_revision], success=[tx.put(key, value)], failure=[]))
        return bool(ok)

    async def swap_and_create(self, key: bytes, value: bytes, mod_revision: int,
                              puts: Sequence[tuple[bytes, bytes]]) -> bool:
        """Replace ``key`` (unchanged since ``mod_revision``) and create ``puts`` (none of
        which may exist), all or none."""
        tx = self.client.transactions
        ok, _ = await self._call(lambda c: c.transaction(
            compare=[tx.mod(key) == mod_revision, *(tx.create(k) == 0 for k, _ in puts)],
            success=[tx.put(key, value), *(tx.put(k, v) for k, v in puts)], failure=[]))
        return bool(ok)

    async def delete_existing(self, keys: Sequence[bytes]) -> bool:
        """Delete every key, all or none, only if the first one exists."""
        tx = self.client.transactions
        ok, _ = await self._call(lambda c: c.transaction(
            compare=[tx.version(keys[0]) > 0], success=[tx.delete(key) for key in keys],
            failure=[]))
        return bool(ok)

    async def delete(self, key: bytes) -> None:
        await self._call(lambda c: c.delete(key))

    # -- reads ----------------------------------------------------------------------------

    async def get(self, key: bytes) -> tuple[bytes, int] | None:
        """The value and mod revision of ``key``, None if it does not exist."""
        found = await self._call(lambda c: c.get(key))
        return None if found is None else (found.value, int(found.mod_revision))

    async def mod_revision(self, key: bytes) -> int:
        found = await self._call(lambda c: c.get(key))
        return 0 if found is None else int(found.mod_revision)

    async def snapshot(self, prefix: bytes) -> tuple[int, list[Entry]]:
        result = await self._call(lambda c: c.get_prefix(prefix))
        return int(result.header.revision), [(kv.key, kv.value, int(kv.mod_revision)) for kv in result]

    async def watch(self, prefix: bytes, start_revision: int) -> AsyncIterator[Entry]:
        watch = await self._call(lambda c: c.watch_prefix(prefix, start_revision=start_revision))
        try:
            async for event in watch:
                deleted = event.kind == "DELETE"
                yield event.kv.key, None if deleted else event.kv.value, int(event.kv.mod_revision)
        finally:
            with contextlib.suppress(Exception):  # the watcher's lock may be held for good
                await bounded(watch.cancel(), CLOSE_TIMEOUT_S)


async def discard(client: Any) -> None:
    """Close an aetcd client, bounded: its watcher's shutdown waits for a lock and a
    bounded queue that a stuck watch stream may hold for ever; then close the channel
    under it (which ends every call on it)."""
    try:
        await bounded(client.close(), CLOSE_TIMEOUT_S)
        return
    except Exception as exc:
        log.warning("etcd: closing the old channel did not finish (%r); closing it under "
                    "its watcher", exc)
    channel = client.channel
    if channel is not None:
        with contextlib.suppress(Exception):
            await bounded(channel.close(), CLOSE_TIMEOUT_S)


_left: set[asyncio.Task[Any]] = set()  # timed-out calls, cancelled, not waited for


async def bounded(call: Awaitable[T], timeout: float | None) -> T:
    """``await call``, or TimeoutError after ``timeout`` seconds (None: unbounded), or
    ConnectionError if the call was cancelled by someone else.

    Not ``asyncio.wait_for``: before Python 3.12 it waits for the cancelled call to end,
    and aetcd's watcher shutdown swallows a cancellation (``await`` of its stream task
    under ``except CancelledError: pass``) and may then wait on: the caller hung for
    good (a broker's session, seen in the fault run). Here the timed-out call is
    cancelled and left to end on its own; its outcome is retrieved, never raised."""
    task = asyncio.ensure_future(call)
    try:
        done, _ = await asyncio.wait({task}, timeout=timeout)
    except BaseException:  # we were cancelled: the call goes too
        task.cancel()
        _leave(task)
        raise
    if task in done:
        if task.cancelled():
            # Not us: gRPC cancels the calls of a channel another task closed (a
            # reconnection). A CancelledError here would end the caller's loop silently.
            raise ConnectionError("etcd call cancelled: its channel was closed")
        return task.result()
    task.cancel()
    _leave(task)
    raise TimeoutError(f"etcd call not done in {timeout:.0f} s")


def _leave(task: asyncio.Task[Any]) -> None:
    _left.add(task)
    task.add_done_callback(_left_done)


def _left_done(task: asyncio.Task[Any]) -> None:
    _left.discard(task)
    if not task.cancelled() and task.exception() is not None:
        log.debug("an abandoned etcd call ended with %r", task.exception())
