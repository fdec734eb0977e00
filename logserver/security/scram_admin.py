"""KIP-554 SCRAM administration, sans-I/O: which alterations of a request are valid and
what DescribeUserScramCredentials reports, with Kafka's error codes and messages.

The wire ids of the mechanisms are Kafka's ``ScramMechanism``: 1 SCRAM-SHA-256,
2 SCRAM-SHA-512 (0 is UNKNOWN).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from kafkaproto import ErrorCode
from logserver.security.credentials import CredentialStore
from logserver.security.scram import (
    MAX_ITERATIONS,
    MECHANISMS,
    MIN_ITERATIONS,
    credential_from_salted_password,
)

__all__ = ["Alteration", "UserResult", "alter", "describe"]

MECHANISM_BY_ID = {wire_id: name for name, (_, wire_id) in MECHANISMS.items()}


@dataclass(frozen=True)
class Alteration:
    """One deletion (``salted_password`` None) or upsertion of a request."""

    user: str
    mechanism_id: int
    iterations: int = 0
    salt: bytes = b""
    salted_password: bytes | None = None


@dataclass(frozen=True)
class UserResult:
    user: str
    error_code: int
    error_message: str | None
    credentials: tuple[tuple[int, int], ...] = ()  # (mechanism id, iterations)


def describe(store: CredentialStore, users: list[str] | None) -> list[UserResult]:
    """All users when ``users`` is None or empty, as Kafka does."""
    if not users:
        return [_describe_one(store, user) for user in store.users()]
    counts = Counter(users)
    results, seen = [], set()
    for user in users:
        if user in seen:
            continue
        seen.add(user)
        if counts[user] > 1:
            results.append(UserResult(user, ErrorCode.DUPLICATE_RESOURCE,
                                      "Cannot describe SCRAM credentials for the same user twice "
                                      f"in a single request: {user}"))
        else:
            results.append(_describe_one(store, user))
    return results


def _describe_one(store: CredentialStore, user: str) -> UserResult:
    mechanisms = store.mechanisms_of(user)
    if not mechanisms:
        return UserResult(user, ErrorCode.RESOURCE_NOT_FOUND,
                          f"Attempt to describe a user credential that does not exist: {user}")
    return UserResult(user, ErrorCode.NONE, None, tuple(
        (MECHANISMS[name][1], credential.iterations)
        for name, credential in sorted(mechanisms.items())))


def alter(store: CredentialStore, alterations: list[Alteration]) -> list[UserResult]:
    """Apply the valid alterations to ``store`` (in memory; the caller saves) and return one
    result per user. A user altered twice in one request gets DUPLICATE_RESOURCE and none
    of its alterations apply."""
    counts = Counter((a.user, a.mechanism_id) for a in alterations)
    users: dict[str, list[Alteration]] = {}
    for alteration in alterations:
        users.setdefault(alteration.user, []).append(alteration)
    results = []
    for user, changes in users.items():
        if any(counts[(user, c.mechanism_id)] > 1 for c in changes):
            results.append(UserResult(user, ErrorCode.DUPLICATE_RESOURCE,
                                      "A user credential cannot be altered twice in the same "
                                      "request"))
            continue
        problem = next(filter(None, (_invalid(store, c) for c in changes)), None)
        if problem is not None:
            results.append(UserResult(user, *problem))
            continue
        for change in changes:
            mechanism = MECHANISM_BY_ID[change.mechanism_id]
            if change.salted_password is None:
                store.delete(user, mechanism)
            else:
                store.upsert(user, mechanism, credential_from_salted_password(
                    mechanism, change.salted_password, change.salt, change.iterations))
        results.append(UserResult(user, ErrorCode.NONE, None))
    return results


def _invalid(store: CredentialStore, change: Alteration) -> tuple[int, str] | None:
    if not change.user:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    mechanism = MECHANISM_BY_ID.get(change.mechanism_id)
    if mechanism is None:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    if change.salted_password is None:
        if store.lookup(change.user, mechanism) is None:
            return (ErrorCode.RESOURCE_NOT_FOUND,
                    "Attempt to delete a user credential that does not exist")
        return None
    if change.iterations < MIN_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"
    if change.iterations > MAX_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"
    if not change.salt or not change.salted_password:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty"
    return None
