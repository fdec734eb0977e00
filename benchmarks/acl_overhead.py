"""What ACL authorization costs on the hottest path: many small Produce requests.

Two servers, back to back in alternating order, each fresh: ``off`` (no
``authorizer.class.name``) and ``on`` (StandardAuthorizer, the client not a super user,
its WRITE granted by an ACL among ``--acls`` unrelated ones, literal and prefixed, so
every request goes through the real decision and its cache). The client is
``small_requests.run_raw``: one 100 B record per Produce request, ``--in-flight``
pipelined on one connection, acks=1; the figure is requests acknowledged per second.

    python -m benchmarks.acl_overhead --runs 3 --seconds 5
"""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
from pathlib import Path

from logserver.security.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from logserver.security.store import ACL_FILE

from .small_requests import TOPIC, _create_topic, run_raw
from .stats import Spread, compare
from .targets import LogserverTarget

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ANONYMOUS = "User:ANONYMOUS"


def acl_set(unrelated: int) -> list[AclBinding]:
    """ANONYMOUS may create the topic and write it; ``unrelated`` ACLs for others."""
    def allow(resource_type: ResourceType, name: str, operation: AclOperation,
              principal: str = ANONYMOUS, pattern: PatternType = PatternType.LITERAL) -> AclBinding:
        return AclBinding(resource_type, name, pattern, principal, "*", operation,
                          AclPermissionType.ALLOW)

    acls = [allow(ResourceType.CLUSTER, CLUSTER_NAME, AclOperation.CREATE),
            allow(ResourceType.TOPIC, TOPIC, AclOperation.WRITE)]
    for i in range(unrelated):
        pattern = PatternType.PREFIXED if i % 2 else PatternType.LITERAL
        acls.append(allow(ResourceType.TOPIC, f"{TOPIC[: 1 + i % len(TOPIC)]}-{i}",
                          AclOperation.READ, principal=f"User:u{i}", pattern=pattern))
    return acls


def one_run(authorized: bool, seconds: float, in_flight: int, unrelated: int) -> float:
    with tempfile.TemporaryDirectory(prefix="acl-overhead-") as tmp:
        extra: list[str] = []
        if authorized:
            extra = ["--authorizer.class.name", STANDARD]
        target = LogserverTarget(Path(tmp), extra)
        if authorized:
            target.data_dir.mkdir(parents=True)
            document = {"version": 1, "acls": [a.to_json() for a in acl_set(unrelated)]}
            (target.data_dir / ACL_FILE).write_text(json.dumps(document))
        with target as server:
            bootstrap = server.bootstrap
            assert bootstrap is not None
            _create_topic(bootstrap)
            return run_raw(bootstrap, seconds, in_flight)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0, help="measured seconds per run")
    parser.add_argument("--in-flight", type=int, default=32)
    parser.add_argument("--acls", type=int, default=200, help="unrelated ACLs on the server")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    figures: dict[bool, list[float]] = {False: [], True: []}
    for run in range(args.runs):
        order = (False, True) if run % 2 == 0 else (True, False)
        for authorized in order:
            figure = one_run(authorized, args.seconds, args.in_flight, args.acls)
            figures[authorized].append(figure)
            print(f"  run {run + 1} authorizer {'on ' if authorized else 'off'}: "
                  f"{figure:,.0f} requests/s", flush=True)
    off, on = Spread.of(figures[False]), Spread.of(figures[True])
    for name, spread in (("off", off), ("on", on)):
        print(f"authorizer {name}: min {spread.low:,.0f} / median {spread.median:,.0f} / "
              f"max {spread.high:,.0f} requests/s over {spread.runs} runs")
    comparison = compare(on, off, higher_is_better=True)
    print(f"on/off: {comparison.text() if comparison else 'no ratio (a median is zero)'}")


if __name__ == "__main__":
    main()
