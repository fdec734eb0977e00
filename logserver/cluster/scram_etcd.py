"""The cluster's SCRAM credentials in etcd, read and changed from outside a broker: the
``logserver scram ... --cluster.etcd.endpoints`` command. A change is a compare-and-swap
of the ``scram_credentials`` key, as a broker's AlterUserScramCredentials does, so the
running brokers' watches apply it and a concurrent change makes it plan again."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from logserver.cluster.etcd import EtcdStore, parse_endpoints
from logserver.cluster.model import Keys
from logserver.cluster.security_sync import SCRAM_KEY
from logserver.security.credentials import CredentialStore

log = logging.getLogger(__name__)
R = TypeVar("R")


async def edit(endpoints: str, prefix: str, start: CredentialStore | None,
               change: Callable[[CredentialStore], tuple[bool, R]]) -> tuple[bool, R]:
    """``change`` the cluster's credentials: it gets them (or, when the cluster holds none
    yet, ``start`` or none) and returns whether to write them back, and its result."""
    store = EtcdStore(parse_endpoints(endpoints))
    key = Keys(prefix).root + SCRAM_KEY
    await store.connect()
    try:
        while True:
            found = await store.get(key)
            working = CredentialStore(start.path.parent if start is not None else Path("."))
            if found is not None:
                working.replace_all(found[0], f"etcd {key.decode()}")
            elif start is not None:
                working.replace_all(start.snapshot()[1])
            write, result = change(working)
            if not write:
                return False, result
            if await store.swap(key, working.snapshot()[1], 0 if found is None else found[1]):
                return True, result
            log.info("SCRAM credentials changed concurrently; planning again")
    finally:
        await store.close()
