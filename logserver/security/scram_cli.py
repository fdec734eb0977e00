"""``logserver scram``: manage SCRAM users offline, e.g. the first admin before the first
start (what ``kafka-storage format --add-scram`` does for Kafka).

The running server owns its credentials (change them there with
AlterUserScramCredentials, e.g. Kafka's ``kafka-configs.sh --alter --add-config``), so
this command takes the data directory's lock and refuses while a server holds it. A
cluster's users are cluster-wide, in etcd: with ``--cluster.etcd.endpoints`` the command
reads and changes them there (brokers running or not); on a cluster member's data
directory without it, it refuses, since the brokers would not use the local file.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

from logserver.cli_parser import SubcommandUsageParser
from logserver.cluster.local_topics import cluster_member_files
from logserver.log.errors import LogDirLockedError
from logserver.log.manager import lock_data_dir
from logserver.security.credentials import CredentialStore
from logserver.security.scram import MAX_ITERATIONS, MECHANISMS, MIN_ITERATIONS, make_credential

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2


def _parser() -> argparse.ArgumentParser:
    parser = SubcommandUsageParser(
        prog="logserver scram",
        description="Add, delete or list the SCRAM credentials of SASL users in a data "
        "directory (salted hashes, never passwords), with the server stopped, or those of "
        "a cluster in etcd (--cluster.etcd.endpoints). Exit codes: 0 done, 1 nothing to "
        "delete or etcd unreachable, 2 usage error or directory in use.",
        allow_abbrev=False)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add = commands.add_parser("add", help="add or replace a user's credential for a mechanism",
                              allow_abbrev=False)
    delete = commands.add_parser("delete", help="delete a user's credential for a mechanism",
                                 allow_abbrev=False)
    show = commands.add_parser("list", help="list users, mechanisms and iteration counts",
                               allow_abbrev=False)
    for sub in (add, delete, show):
        sub.add_argument("--data-dir", type=Path, metavar="DIR",
                         help="the server's log.dirs (with --cluster.etcd.endpoints: the "
                         "users to start from if the cluster has none yet)")
        sub.add_argument("--cluster.etcd.endpoints", dest="etcd_endpoints", metavar="HOST:PORT",
                         help="the cluster's etcd (host:port,...): change its users there")
        sub.add_argument("--cluster.etcd.prefix", dest="etcd_prefix", default="/logserver",
                         metavar="PREFIX", help="the cluster's key prefix (default /logserver)")
    for sub in (add, delete):
        sub.add_argument("--user", required=True, help="the SASL user name")
        sub.add_argument("--mechanism", required=True, choices=sorted(MECHANISMS))
    source = add.add_mutually_exclusive_group(required=True)
    source.add_argument("--password-file", type=Path, metavar="FILE",
                        help="file holding the password (one trailing newline is dropped)")
    source.add_argument("--password-stdin", action="store_true",
                        help="read the password from standard input")
    add.add_argument("--iterations", type=int, default=MIN_ITERATIONS,
                     help=f"PBKDF2 iterations, {MIN_ITERATIONS}..{MAX_ITERATIONS} "
                     f"(default {MIN_ITERATIONS})")
    return parser


def main(argv: list[str]) -> int:
    """``argv`` starts with "scram"."""
    parser = _parser()
    try:
        args = parser.parse_args(argv[1:])
    except SystemExit as exc:
        return EXIT_USAGE if exc.code else EXIT_OK
    try:
        return _run(args)
    except _Usage as exc:
        print(f"logserver scram: {exc}", file=sys.stderr)
        return EXIT_USAGE


class _Usage(Exception):
    pass


def _run(args: argparse.Namespace) -> int:
    data_dir: Path | None = args.data_dir
    password = ""
    if args.command == "add":
        password = _password(args)
        if not MIN_ITERATIONS <= args.iterations <= MAX_ITERATIONS:
            raise _Usage(f"--iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}")
        if not args.user:
            raise _Usage("--user must not be empty")
    if args.etcd_endpoints is not None:
        return _run_in_etcd(args, password)
    if data_dir is None:
        raise _Usage("give --data-dir DIR (or --cluster.etcd.endpoints HOST:PORT for a cluster)")
    member = cluster_member_files(data_dir)
    if member:
        raise _Usage(f"{data_dir} is a cluster member's ({member[0]}): its users are "
                     "cluster-wide in etcd; add --cluster.etcd.endpoints HOST:PORT (and "
                     "--cluster.etcd.prefix) or use AlterUserScramCredentials on a broker")
    if args.command == "add":
        data_dir.mkdir(parents=True, exist_ok=True)
    elif not data_dir.is_dir():
        raise _Usage(f"{data_dir} is not a directory")
    try:
        lock = lock_data_dir(data_dir)
    except LogDirLockedError as exc:
        raise _Usage(f"{exc}: a running server manages its users itself (AlterUserScramCredentials,"
                     f" e.g. kafka-configs.sh --alter --add-config 'SCRAM-SHA-256=[password=...]' "
                     f"--entity-type users --entity-name NAME)") from None
    except OSError as exc:
        raise _Usage(f"cannot lock {data_dir}: {exc.strerror}") from None
    try:
        try:
            store = CredentialStore(data_dir).load()
        except ValueError as exc:
            raise _Usage(str(exc)) from None
        if args.command == "list":
            for user in store.users():
                for mechanism, credential in sorted(store.mechanisms_of(user).items()):
                    print(f"{user}\t{mechanism}\titerations={credential.iterations}")
            return EXIT_OK
        if args.command == "delete":
            if not store.delete(args.user, args.mechanism):
                print(f"logserver scram: user {args.user!r} has no {args.mechanism} credential",
                      file=sys.stderr)
                return EXIT_ERROR
            store.save()
            print(f"deleted {args.mechanism} credential of {args.user}")
            return EXIT_OK
        store.upsert(args.user, args.mechanism,
                     make_credential(args.mechanism, password, args.iterations))
        store.save()
        print(f"added {args.mechanism} credential for {args.user} "
              f"({args.iterations} iterations) in {store.path}")
        return EXIT_OK
    finally:
        os.close(lock)


def _run_in_etcd(args: argparse.Namespace, password: str) -> int:
    """The cluster's users: read, or changed by one compare-and-swap in etcd (the
    running brokers apply it from their watch). With no users in etcd yet, a change
    starts from ``--data-dir``'s, as a broker's first AlterUserScramCredentials starts
    from its own."""
    from logserver.cluster import scram_etcd  # etcd client only where etcd is used

    start = None
    if args.data_dir is not None:
        try:
            start = CredentialStore(args.data_dir).load()
        except ValueError as exc:
            raise _Usage(str(exc)) from None

    def change(store: CredentialStore) -> tuple[bool, int]:
        if args.command == "list":
            for user in store.users():
                for mechanism, credential in sorted(store.mechanisms_of(user).items()):
                    print(f"{user}\t{mechanism}\titerations={credential.iterations}")
            return False, EXIT_OK
        if args.command == "delete":
            if not store.delete(args.user, args.mechanism):
                print(f"logserver scram: user {args.user!r} has no {args.mechanism} credential "
                      "in the cluster", file=sys.stderr)
                return False, EXIT_ERROR
            return True, EXIT_OK
        store.upsert(args.user, args.mechanism,
                     make_credential(args.mechanism, password, args.iterations))
        return True, EXIT_OK

    where = f"etcd {args.etcd_endpoints} {args.etcd_prefix.rstrip('/')}/scram_credentials"
    try:
        written, code = asyncio.run(scram_etcd.edit(args.etcd_endpoints, args.etcd_prefix,
                                                    start, change))
    except ValueError as exc:  # bad endpoints, or a damaged value in etcd
        raise _Usage(str(exc)) from None
    except Exception as exc:  # etcd unreachable or failing
        print(f"logserver scram: {where}: {exc}", file=sys.stderr)
        return EXIT_ERROR
    if written and args.command == "delete":
        print(f"deleted {args.mechanism} credential of {args.user} in {where}")
    elif written:
        print(f"added {args.mechanism} credential for {args.user} "
              f"({args.iterations} iterations) in {where}")
    return code


def _password(args: argparse.Namespace) -> str:
    if args.password_stdin:
        text = sys.stdin.read()
    else:
        try:
            text = args.password_file.read_text(encoding="utf-8")
        except OSError as exc:
            raise _Usage(f"--password-file {args.password_file}: {exc.strerror}") from None
        except UnicodeDecodeError:
            raise _Usage(f"--password-file {args.password_file}: not UTF-8 text") from None
    password = text[:-1] if text.endswith("\n") else text
    password = password[:-1] if password.endswith("\r") else password
    if not password:
        raise _Usage("the password is empty")
    return password
