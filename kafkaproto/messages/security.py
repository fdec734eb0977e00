"""Authentication: SaslHandshake (17), SaslAuthenticate (36), and the SCRAM credential
administration of KIP-554: DescribeUserScramCredentials (50), AlterUserScramCredentials (51)."""

from __future__ import annotations

from ..schema import F
from ..spec import api

# fmt: off

SASL_HANDSHAKE = api(
    17,
    "SaslHandshake",
    "0-1",
    flexible=None,
    request=(
        F("Mechanism", "string", "0+"),
    ),
    response=(
        F("ErrorCode", "int16", "0+"),
        F("Mechanisms", "[]string", "0+"),
    ),
)

SaslHandshakeRequest = SASL_HANDSHAKE.request
SaslHandshakeResponse = SASL_HANDSHAKE.response

SASL_AUTHENTICATE = api(
    36,
    "SaslAuthenticate",
    "0-2",
    flexible="2+",
    request=(
        F("AuthBytes", "bytes", "0+"),
    ),
    response=(
        F("ErrorCode", "int16", "0+"),
        F("ErrorMessage", "string", "0+", nullable="0+", default=None),
        F("AuthBytes", "bytes", "0+"),
        F("SessionLifetimeMs", "int64", "1+", default=0),
    ),
)

SaslAuthenticateRequest = SASL_AUTHENTICATE.request
SaslAuthenticateResponse = SASL_AUTHENTICATE.response

DESCRIBE_USER_SCRAM_CREDENTIALS = api(
    50,
    "DescribeUserScramCredentials",
    "0",
    flexible="0+",
    request=(
        F(
            "Users", "[]UserName", "0+",
            F("Name", "string", "0+"),
            nullable="0+",
        ),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "0+"),
        F("ErrorCode", "int16", "0+"),
        F("ErrorMessage", "string", "0+", nullable="0+", default=None),
        F(
            "Results", "[]DescribeUserScramCredentialsResult", "0+",
            F("User", "string", "0+"),
            F("ErrorCode", "int16", "0+"),
            F("ErrorMessage", "string", "0+", nullable="0+", default=None),
            F(
                "CredentialInfos", "[]CredentialInfo", "0+",
                F("Mechanism", "int8", "0+"),
                F("Iterations", "int32", "0+"),
            ),
        ),
    ),
)

DescribeUserScramCredentialsRequest = DESCRIBE_USER_SCRAM_CREDENTIALS.request
DescribeUserScramCredentialsResponse = DESCRIBE_USER_SCRAM_CREDENTIALS.response

ALTER_USER_SCRAM_CREDENTIALS = api(
    51,
    "AlterUserScramCredentials",
    "0",
    flexible="0+",
    request=(
        F(
            "Deletions", "[]ScramCredentialDeletion", "0+",
            F("Name", "string", "0+"),
            F("Mechanism", "int8", "0+"),
        ),
        F(
            "Upsertions", "[]ScramCredentialUpsertion", "0+",
            F("Name", "string", "0+"),
            F("Mechanism", "int8", "0+"),
            F("Iterations", "int32", "0+"),
            F("Salt", "bytes", "0+"),
            F("SaltedPassword", "bytes", "0+"),
        ),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "0+"),
        F(
            "Results", "[]AlterUserScramCredentialsResult", "0+",
            F("User", "string", "0+"),
            F("ErrorCode", "int16", "0+"),
            F("ErrorMessage", "string", "0+", nullable="0+", default=None),
        ),
    ),
)

AlterUserScramCredentialsRequest = ALTER_USER_SCRAM_CREDENTIALS.request
AlterUserScramCredentialsResponse = ALTER_USER_SCRAM_CREDENTIALS.response
