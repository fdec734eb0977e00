"""DescribeUserScramCredentials (KIP-554): users, mechanisms and iteration counts; never
salts or keys."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkaproto import RequestHeader
from kafkaproto.messages import (
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)
from logserver.security import checks
from logserver.security.scram_admin import describe

if TYPE_CHECKING:
    from logserver.services import BrokerServices

Response = DescribeUserScramCredentialsResponse


def handle(broker: BrokerServices, header: RequestHeader,
           request: DescribeUserScramCredentialsRequest) -> DescribeUserScramCredentialsResponse:
    refused = checks.denied(broker, checks.DESCRIBE_USER_SCRAM_CREDENTIALS)
    if refused:
        # As Kafka, with the error's default message: librdkafka aborts on a null one here.
        return Response(throttle_time_ms=0, error_code=refused,
                        error_message="Cluster authorization failed.", results=[])
    users = None if request.users is None else [u.name for u in request.users]
    return Response(throttle_time_ms=0, error_code=0, error_message=None, results=[
        Response.DescribeUserScramCredentialsResult(
            user=r.user, error_code=r.error_code, error_message=r.error_message,
            credential_infos=[Response.CredentialInfo(mechanism=m, iterations=i)
                              for m, i in r.credentials])
        for r in describe(broker.scram, users)])
