"""The new override set of a topic from an AlterConfigs or IncrementalAlterConfigs request.

Pure functions (no storage): the handlers validate the result with
``topic_config.validate_overrides`` and hand it to ``Storage.alter_topic_config``.
AlterConfigs replaces every override; IncrementalAlterConfigs applies SET, DELETE,
APPEND and SUBTRACT (the last two only to list settings), as Kafka's ConfigAdminManager.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from kafkaproto import ErrorCode
from kafkaproto.messages.admin_alter import OP_APPEND as APPEND
from kafkaproto.messages.admin_alter import OP_DELETE as DELETE
from kafkaproto.messages.admin_alter import OP_SET as SET
from kafkaproto.messages.admin_alter import OP_SUBTRACT as SUBTRACT
from logserver.topic_config import LIST, TOPIC_SETTINGS

__all__ = ["APPEND", "DELETE", "SET", "SUBTRACT", "ConfigChangeError", "incremental", "replacement"]

_OPS = {SET: "set", DELETE: "delete", APPEND: "append", SUBTRACT: "subtract"}


class ConfigChangeError(Exception):
    """A change the request cannot make; ``code`` is the Kafka error for the resource."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def _no_duplicates(names: Iterable[str]) -> None:
    duplicated = sorted(name for name, n in Counter(names).items() if n > 1)
    if duplicated:
        raise ConfigChangeError(ErrorCode.INVALID_REQUEST,
                                f"Error due to duplicate config keys: {', '.join(duplicated)}")


def replacement(configs: Iterable[tuple[str, str | None]]) -> dict[str, str]:
    """AlterConfigs: the given configs become the topic's only overrides."""
    configs = list(configs)
    _no_duplicates(name for name, _ in configs)
    result = {}
    for name, value in configs:
        if value is None:
            raise ConfigChangeError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {name}")
        result[name] = value
    return result


def incremental(current: Mapping[str, str], changes: Iterable[tuple[str, int, str | None]],
                effective: Mapping[str, str], lists: Iterable[str] | None = None) -> dict[str, str]:
    """IncrementalAlterConfigs: ``current`` overrides with (name, operation, value) applied;
    APPEND and SUBTRACT start from the override, else the ``effective`` (inherited) value;
    they apply to ``lists`` (default: the topic settings of type list)."""
    list_names = set(lists) if lists is not None else {
        name for name, setting in TOPIC_SETTINGS.items() if setting.type == LIST}
    changes = list(changes)
    _no_duplicates(name for name, _, _ in changes)
    result = dict(current)
    for name, op, value in changes:
        if op not in _OPS:
            raise ConfigChangeError(ErrorCode.INVALID_REQUEST, f"unknown config operation {op}")
        if op == DELETE:
            result.pop(name, None)
            continue
        if value is None:
            raise ConfigChangeError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {name}")
        if op == SET:
            result[name] = value
            continue
        if name not in list_names:
            raise ConfigChangeError(ErrorCode.INVALID_CONFIG,
                                    f"Config value {_OPS[op]} is not allowed for config key: {name}")
        old = result.get(name, effective.get(name, ""))
        items = [item.strip() for item in old.split(",") if item.strip()]
        given = [item.strip() for item in value.split(",") if item.strip()]
        if op == APPEND:
            items += [item for item in given if item not in items]
        else:
            items = [item for item in items if item not in given]
        result[name] = ",".join(items)
    return result
