"""The override set AlterConfigs / IncrementalAlterConfigs compute (no server needed)."""

from __future__ import annotations

import pytest

from kafkaproto import ErrorCode
from logserver.config_changes import (
    APPEND,
    DELETE,
    SET,
    SUBTRACT,
    ConfigChangeError,
    incremental,
    replacement,
)

EFFECTIVE = {"cleanup.policy": "delete", "retention.ms": "604800000"}


def test_replacement_is_the_whole_new_set() -> None:
    assert replacement([("retention.ms", "5"), ("segment.ms", "9")]) == {"retention.ms": "5",
                                                                         "segment.ms": "9"}
    with pytest.raises(ConfigChangeError) as caught:
        replacement([("retention.ms", None)])
    assert caught.value.code == ErrorCode.INVALID_REQUEST
    with pytest.raises(ConfigChangeError) as caught:
        replacement([("retention.ms", "1"), ("retention.ms", "2")])
    assert caught.value.code == ErrorCode.INVALID_REQUEST


def test_incremental_operations() -> None:
    current = {"retention.ms": "5", "segment.ms": "9"}
    assert incremental(current, [("retention.ms", DELETE, None), ("segment.ms", SET, "10")],
                       EFFECTIVE) == {"segment.ms": "10"}
    assert incremental({}, [("cleanup.policy", APPEND, "compact")], EFFECTIVE) == \
        {"cleanup.policy": "delete,compact"}
    assert incremental({"cleanup.policy": "delete,compact"},
                       [("cleanup.policy", SUBTRACT, "delete")], EFFECTIVE) == \
        {"cleanup.policy": "compact"}
    assert incremental({}, [("cleanup.policy", APPEND, "delete")], EFFECTIVE) == \
        {"cleanup.policy": "delete"}  # already there: not twice
    assert current == {"retention.ms": "5", "segment.ms": "9"}  # not changed in place


@pytest.mark.parametrize(("change", "code"), [
    (("retention.ms", APPEND, "1"), ErrorCode.INVALID_CONFIG),  # not a list setting
    (("retention.ms", SET, None), ErrorCode.INVALID_REQUEST),
    (("retention.ms", 9, "1"), ErrorCode.INVALID_REQUEST),
])
def test_incremental_refusals(change: tuple[str, int, str | None], code: int) -> None:
    with pytest.raises(ConfigChangeError) as caught:
        incremental({}, [change], EFFECTIVE)
    assert caught.value.code == code
