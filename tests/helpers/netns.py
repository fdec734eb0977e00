"""Test hosts as Linux network namespaces on one bridge, for real network partitions.

``NetLab`` builds, with ``ip`` (iproute2, needs root): a hub namespace holding a Linux
bridge; one namespace per host, each joined to the bridge by a veth pair and given a
private address 10.213.S.N/24 in a subnet S no other address of this machine uses; and a
veth from the test's own (root) namespace into the bridge (10.213.S.1), so the test's
clients reach every host. ``cut(host)`` takes the host's bridge port down: its packets
are dropped silently, as in a real partition (no resets, no errors), until ``heal(host)``;
``isolate(hosts)`` cuts those hosts off from one another only.

Names carry the test's pid, so parallel runs (pytest-xdist workers) do not collide, and
the subnet is chosen and taken under a machine-wide lock; ``close()`` deletes every
namespace (and with them every veth and the bridge). Creating them fails loudly: a
machine where this cannot run fails the test, it never skips it.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import re
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator
from typing import TypeVar

T = TypeVar("T")
CLONE_NEWNET = 0x40000000
SUBNET_LOCK = "/run/lock/logserver-tests-netlab.lock"


def ip(*args: str) -> str:
    """Run ``ip ARGS``; raise with its stderr if it fails."""
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise RuntimeError(f"`ip {' '.join(args)}` failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout


def _free_subnet() -> int:
    """A third octet S such that no address of the root namespace is in 10.213.S.0/24."""
    used = {int(m) for m in re.findall(r"inet 10\.213\.(\d+)\.", ip("-4", "-o", "addr", "show"))}
    start = os.getpid() % 250 + 1
    for step in range(250):
        candidate = (start + step) % 250 + 1
        if candidate not in used:
            return candidate
    raise RuntimeError("no free 10.213.S.0/24 subnet for the test network")


STALE_NAME = re.compile(r"^ls(\d+)-\S+")
STALE_LINK = re.compile(r"^\d+: (l(\d+)r)[@:]")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_stale() -> list[str]:
    """Delete the namespaces (and root veths) of labs whose test process is gone: one
    killed (SIGKILL, a timeout) never ran ``close()``. Names carry the pid that made
    them; a live pid's are left alone. Returns what was deleted."""
    swept = []
    for line in ip("netns", "list").splitlines():
        match = STALE_NAME.match(line.strip())
        if match is not None and not _alive(int(match.group(1))):
            name = line.split()[0]
            with contextlib.suppress(RuntimeError):  # another sweeper was first
                ip("netns", "del", name)
                swept.append(name)
    for line in ip("-o", "link", "show").splitlines():
        match = STALE_LINK.match(line)
        if match is not None and not _alive(int(match.group(2))):
            with contextlib.suppress(RuntimeError):
                ip("link", "del", match.group(1))
                swept.append(match.group(1))
    return swept


class NetLab:
    """Namespaces ``names`` joined by one bridge; see the module docstring."""

    def __init__(self, names: list[str]) -> None:
        self.tag = str(os.getpid())
        self.subnet = 0  # chosen by start()
        self.hub = f"ls{self.tag}-hub"
        self.namespaces: dict[str, str] = {}  # host name -> namespace
        self.addresses: dict[str, str] = {}  # host name -> its address
        self.ports: dict[str, str] = {}  # host name -> its veth's end on the bridge (in hub)
        self.root_link = f"l{self.tag}r"
        self._created: list[str] = []
        self._names = names

    def start(self) -> NetLab:
        try:
            # Choosing a free subnet and taking it (the root veth's address) is one step
            # for every lab on this machine: two labs built at once would pick the same.
            with open(SUBNET_LOCK, "a") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                sweep_stale()  # a killed run's namespaces, and the subnets they held
                self.subnet = _free_subnet()
                self._build()
        except BaseException:
            self.close()
            raise
        return self

    def _build(self) -> None:
        self._add_namespace(self.hub)
        ip("-n", self.hub, "link", "add", "br0", "type", "bridge")
        ip("-n", self.hub, "link", "set", "br0", "up")
        for number, name in enumerate(self._names, start=2):
            namespace = f"ls{self.tag}-{name}"
            self._add_namespace(namespace)
            port = f"l{self.tag}p{number}"
            ip("link", "add", "eth0", "netns", namespace, "type", "veth",
               "peer", "name", port, "netns", self.hub)
            address = f"10.213.{self.subnet}.{number}"
            ip("-n", namespace, "addr", "add", f"{address}/24", "dev", "eth0")
            ip("-n", namespace, "link", "set", "eth0", "up")
            ip("-n", self.hub, "link", "set", port, "master", "br0", "up")
            self.namespaces[name], self.addresses[name], self.ports[name] = namespace, address, port
        # The test's own way in: a veth from the root namespace into the bridge.
        ip("link", "add", self.root_link, "type", "veth", "peer", "name", "up0", "netns", self.hub)
        ip("addr", "add", f"10.213.{self.subnet}.1/24", "dev", self.root_link)
        ip("link", "set", self.root_link, "up")
        ip("-n", self.hub, "link", "set", "up0", "master", "br0", "up")

    def _add_namespace(self, namespace: str) -> None:
        ip("netns", "add", namespace)
        self._created.append(namespace)
        ip("-n", namespace, "link", "set", "lo", "up")

    def close(self) -> None:
        """Delete every namespace this lab created (their veths and the bridge go with
        them) and the root veth; first stop the processes running inside them."""
        errors = []
        with contextlib.suppress(RuntimeError):
            ip("link", "del", self.root_link)  # gone already if the hub was deleted
        for namespace in reversed(self._created):
            try:
                ip("netns", "del", namespace)
            except RuntimeError as exc:
                errors.append(str(exc))
        self._created.clear()
        if errors:
            raise RuntimeError("; ".join(errors))

    # -- partitions ---------------------------------------------------------------------

    def cut(self, name: str) -> None:
        """Take ``name``'s port on the bridge down: its packets go nowhere, silently."""
        ip("-n", self.hub, "link", "set", self.ports[name], "down")

    def heal(self, name: str) -> None:
        ip("-n", self.hub, "link", "set", self.ports[name], "up")

    def isolate(self, names: list[str], on: bool = True) -> None:
        """Bridge port isolation: hosts ``names`` no longer reach one another, while each
        still reaches every other host (and the test) - a partial partition."""
        for name in names:
            ip("-n", self.hub, "link", "set", "dev", self.ports[name], "type", "bridge_slave",
               "isolated", "on" if on else "off")

    # -- acting from inside a host --------------------------------------------------------

    def inside(self, name: str, action: Callable[[], T]) -> T:
        """``action()`` run by a thread that has entered ``name``'s network namespace, so
        that the sockets it opens live there (and keep working from any thread)."""
        result: list[T] = []
        failure: list[BaseException] = []

        def run() -> None:
            try:
                libc = ctypes.CDLL(None, use_errno=True)
                with open(f"/run/netns/{self.namespaces[name]}") as handle:
                    if libc.setns(handle.fileno(), CLONE_NEWNET) != 0:
                        raise OSError(ctypes.get_errno(), "setns into the network namespace failed")
                result.append(action())
            except BaseException as exc:
                failure.append(exc)

        thread = threading.Thread(target=run, name=f"in-{name}")
        thread.start()
        thread.join(60)
        if failure:
            raise failure[0]
        assert result, f"nothing done inside {name} within 60 s"
        return result[0]


@contextlib.contextmanager
def netlab(names: list[str]) -> Iterator[NetLab]:
    lab = NetLab(names).start()
    try:
        yield lab
    finally:
        lab.close()


def reachable(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False
