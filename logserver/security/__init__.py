"""Kafka listener security: TLS, SASL authentication, SCRAM credentials, principals, and
authorization (Kafka's ACL model, authorizer and checks).

Each listener has a security protocol (Kafka's ``PLAINTEXT``, ``SSL``,
``SASL_PLAINTEXT``, ``SASL_SSL``); every connection carries a
:class:`~logserver.security.session.ConnectionSecurity` that says who the client is and
what it may send before it has authenticated. The SASL and SCRAM state machines are
sans-I/O; the network layer only asks them what to do with each frame. For
authorization, ``acl`` is the vocabulary, ``authorizer`` the decision (sans-I/O), ``store``
the file the ACLs live in, ``checks`` what each request needs.
"""


from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from logserver.security.authorizer import Authorizer, parse_super_users

__all__ = ["authorizer_from_settings"]


def authorizer_from_settings(config: Mapping[str, Any]) -> Authorizer | None:
    """The authorizer ``authorizer.class.name`` asks for, or None: every request allowed."""
    if not config["authorizer.class.name"]:
        return None
    return Authorizer(parse_super_users(config["super.users"] or ""),
                      config["allow.everyone.if.no.acl.found"])
