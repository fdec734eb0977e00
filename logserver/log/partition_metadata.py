"""``partition.metadata``: the topic id written into each partition directory, as Kafka
does (KIP-516), so a directory can be matched to its topic without the topics file.

Format (Kafka's PartitionMetadataFile)::

    version: 0
    topic_id: <the id in Kafka's text form: URL-safe base64, no padding>

``__topics.json`` stays the source of truth: a missing or stale file is rewritten at open.
"""

from __future__ import annotations

import base64
import logging
from pathlib import Path

log = logging.getLogger(__name__)

__all__ = ["PARTITION_METADATA_FILE", "ensure_topic_id", "read_topic_id", "topic_id_text",
           "write_topic_id"]

PARTITION_METADATA_FILE = "partition.metadata"


def topic_id_text(topic_id: bytes) -> str:
    """Kafka's ``Uuid.toString()``: URL-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(topic_id).decode().rstrip("=")


def write_topic_id(directory: Path, topic_id: bytes) -> None:
    (directory / PARTITION_METADATA_FILE).write_text(
        f"version: 0\ntopic_id: {topic_id_text(topic_id)}\n", "utf-8")


def read_topic_id(directory: Path) -> bytes | None:
    """The id in the file, or None when it is missing or unreadable."""
    try:
        lines = (directory / PARTITION_METADATA_FILE).read_text("utf-8").splitlines()
        fields = dict(line.split(": ", 1) for line in lines if ": " in line)
        if fields.get("version") != "0":
            return None
        text = fields["topic_id"].strip()
        topic_id = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        return topic_id if len(topic_id) == 16 else None
    except (OSError, KeyError, ValueError):
        return None


def ensure_topic_id(directory: Path, topic_id: bytes) -> None:
    """Rewrite the file when it is missing or names another id (logged)."""
    found = read_topic_id(directory)
    if found == topic_id:
        return
    if found is not None:
        log.warning("%s: %s names topic id %s, the topics file %s; rewritten", directory,
                    PARTITION_METADATA_FILE, topic_id_text(found), topic_id_text(topic_id))
    write_topic_id(directory, topic_id)
