"""The log's settings are the resolved topic configuration (logserver.topic_config).

``LogConfig`` is kept as the log layer's name for ``TopicConfig``: one frozen object per
partition, read as attributes on the hot path (no dict lookups per append).
"""

from __future__ import annotations

from logserver.topic_config import TopicConfig, setting_value

__all__ = ["LogConfig", "TopicConfig", "setting_value"]

LogConfig = TopicConfig
