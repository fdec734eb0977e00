"""Authorization on the Kafka listener: Kafka's ACL model, authorizer and checks.

``acl`` is the vocabulary, ``authorizer`` the decision (sans-I/O), ``store`` the file the
ACLs live in, ``checks`` what each request needs, ``settings`` how it is switched on.
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
