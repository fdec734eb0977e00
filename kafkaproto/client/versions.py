"""Version negotiation from an ApiVersions response.

The version used for an API is min(our max, the broker's max) and must be at least both
minimums; an API the broker does not list is not supported at all.
"""

from __future__ import annotations

from ..errors import ErrorCode
from ..messages import ApiVersionsResponse
from ..registry import API_SPECS
from .errors import KafkaError

__all__ = ["ApiVersionTable"]


class ApiVersionTable:
    """The broker's (min, max) per API key, and the versions both sides speak."""

    def __init__(self, ranges: dict[int, tuple[int, int]]) -> None:
        self.ranges = ranges

    @classmethod
    def from_response(cls, response: ApiVersionsResponse) -> ApiVersionTable:
        if response.error_code:
            raise KafkaError(f"ApiVersions error {response.error_code}", response.error_code)
        return cls({k.api_key: (k.min_version, k.max_version) for k in response.api_keys})

    def supports(self, api_key: int) -> bool:
        return api_key in self.ranges

    def version(self, api_key: int, ceiling: int | None = None) -> int:
        """The highest version both sides speak (at most ``ceiling``); KafkaError if none."""
        spec = API_SPECS.get(api_key)
        theirs = self.ranges.get(api_key)
        name = spec.name if spec is not None else f"API {api_key}"
        if spec is None or theirs is None:
            raise KafkaError(f"broker does not support {name}", ErrorCode.UNSUPPORTED_VERSION)
        top = min(theirs[1], spec.max_version)
        if ceiling is not None:
            top = min(top, ceiling)
        if top < max(theirs[0], spec.min_version):
            raise KafkaError(f"no common version of {name}", ErrorCode.UNSUPPORTED_VERSION)
        return top
