"""AlterUserScramCredentials (KIP-554): the client sends salt and SaltedPassword, the
server keeps StoredKey/ServerKey. Answered once the change is durable (the credential
file written on a worker thread; in a cluster, etcd's), so an acknowledged change
survives a crash."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING

from kafkaproto import RequestHeader
from kafkaproto.messages import AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse
from logserver.security import checks
from logserver.security.scram_admin import Alteration, UserResult

if TYPE_CHECKING:
    from logserver.services import BrokerServices

Response = AlterUserScramCredentialsResponse


def handle(broker: BrokerServices, header: RequestHeader, request: AlterUserScramCredentialsRequest) -> (
        Awaitable[AlterUserScramCredentialsResponse]):
    alterations = [Alteration(d.name, d.mechanism) for d in request.deletions] + [
        Alteration(u.name, u.mechanism, u.iterations, bytes(u.salt), bytes(u.salted_password))
        for u in request.upsertions]
    refused = checks.denied(broker, checks.ALTER_USER_SCRAM_CREDENTIALS)
    if refused:  # as Kafka: every user in the request gets the refusal, nothing changes
        users = dict.fromkeys(a.user for a in alterations)
        return _refused([UserResult(user, refused, "not authorized to alter SCRAM credentials")
                         for user in users])
    return _altered(broker, alterations)


async def _refused(results: list[UserResult]) -> Response:
    return _response(results)


async def _altered(broker: BrokerServices, alterations: list[Alteration]) -> Response:
    # this broker's credential file, or the cluster's credentials in etcd
    return _response(await broker.control.alter_scram(alterations))


def _response(results: list[UserResult]) -> Response:
    return Response(throttle_time_ms=0, results=[
        Response.AlterUserScramCredentialsResult(user=r.user, error_code=r.error_code,
                                                 error_message=r.error_message)
        for r in results])
