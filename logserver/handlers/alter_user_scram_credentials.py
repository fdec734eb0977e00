"""AlterUserScramCredentials (KIP-554): the client sends salt and SaltedPassword, the
server keeps StoredKey/ServerKey. Answered once the credential file is durable (written on
a worker thread), so an acknowledged change survives a crash."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TYPE_CHECKING

from kafkaproto import RequestHeader
from kafkaproto.messages import AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse
from logserver.security import checks
from logserver.security.scram_admin import Alteration, UserResult, alter

if TYPE_CHECKING:
    from logserver.broker import Broker
    from logserver.cluster.security_sync import ClusterSecurity

Response = AlterUserScramCredentialsResponse


def handle(broker: Broker, header: RequestHeader, request: AlterUserScramCredentialsRequest) -> (
        Awaitable[AlterUserScramCredentialsResponse]):
    alterations = [Alteration(d.name, d.mechanism) for d in request.deletions] + [
        Alteration(u.name, u.mechanism, u.iterations, bytes(u.salt), bytes(u.salted_password))
        for u in request.upsertions]
    refused = checks.denied(broker, checks.ALTER_USER_SCRAM_CREDENTIALS)
    if refused:  # as Kafka: every user in the request gets the refusal, nothing changes
        users = dict.fromkeys(a.user for a in alterations)
        return _saved(broker, [UserResult(user, refused, "not authorized to alter SCRAM credentials")
                               for user in users])
    if broker.cluster is not None:  # cluster-wide, in etcd (logserver/cluster/security_sync.py)
        return _in_cluster(broker.cluster.security, alterations)
    results = alter(broker.scram, alterations)
    return _saved(broker, results)


async def _in_cluster(security: ClusterSecurity, alterations: list[Alteration]) -> Response:
    return _response(await security.alter_scram(alterations))


async def _saved(broker: Broker, results: list[UserResult]) -> AlterUserScramCredentialsResponse:
    if any(r.error_code == 0 for r in results):
        await asyncio.to_thread(broker.scram.save, broker.scram.snapshot())
    return _response(results)


def _response(results: list[UserResult]) -> Response:
    return Response(throttle_time_ms=0, results=[
        Response.AlterUserScramCredentialsResult(user=r.user, error_code=r.error_code,
                                                 error_message=r.error_message)
        for r in results])
