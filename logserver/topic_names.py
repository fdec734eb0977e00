"""Kafka's topic-name rules, so names that Kafka refuses are refused here too.

Every file name fits in 255 bytes: a partition directory ``<topic>-<p>`` is at most
249 + 1 + 5 characters (a topic has at most 100,000 partitions), and a deleted one,
``<topic>-<p>.<32 hex>-delete``, has its topic cut to fit (as Kafka does; see
``logserver.log.local_log.delete_dir_name``). Names are ASCII, so characters are bytes.
"""

from __future__ import annotations

import re

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")


def topic_name_error(name: str | None) -> str | None:
    """Why ``name`` is not a legal topic name, or None when it is."""
    if not name:
        return "topic name is empty"
    if name in (".", ".."):
        return f"topic name cannot be {name!r}"
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return f"topic name is longer than {MAX_TOPIC_NAME_LENGTH} characters"
    if not _LEGAL.fullmatch(name):
        return f"topic name {name!r} has characters other than ASCII alphanumerics, '.', '_' and '-'"
    return None
