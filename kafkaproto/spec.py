"""One API = request + response declarations + the version facts the framing needs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .api_keys import ApiKey
from .codegen import Message, build_message
from .schema import Field, StructDecl, VersionRange

__all__ = ["ApiSpec", "api"]


@dataclass(frozen=True, slots=True, eq=False)
class ApiSpec:
    """Everything known about one Kafka API: classes, declared range, flexible versions.

    ``min_version``/``max_version`` is what this codec can encode and decode;
    which versions the server advertises is the server's decision.
    """

    api_key: int
    name: str
    request: type[Message]
    response: type[Message]
    min_version: int
    max_version: int
    flexible_min: int | None

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    def is_flexible(self, version: int) -> bool:
        return self.flexible_min is not None and version >= self.flexible_min

    def request_header_version(self, version: int) -> int:
        """Header v2 (with tag buffer) for flexible versions, else v1."""
        return 2 if self.is_flexible(version) else 1

    def response_header_version(self, version: int) -> int:
        """Header v1 for flexible versions, except ApiVersions which is always v0 (KIP-511)."""
        if self.api_key == ApiKey.API_VERSIONS:
            return 0
        return 1 if self.is_flexible(version) else 0


def api(
    key: int,
    name: str,
    versions: str,
    *,
    flexible: str | None,
    request: Sequence[Field],
    response: Sequence[Field],
    common: Sequence[StructDecl] = (),
) -> ApiSpec:
    """Declare an API and build its ``<name>Request``/``<name>Response`` classes."""
    vr = VersionRange.parse(versions)
    fr = VersionRange.parse(flexible)
    flexible_min = None if fr.empty else fr.lo
    classes = {}
    for kind, fields in (("Request", request), ("Response", response)):
        classes[kind] = build_message(
            name + kind,
            fields,
            api_key=key,
            api_name=name,
            is_request=kind == "Request",
            min_version=vr.lo,
            max_version=vr.hi,
            flexible_min=flexible_min,
            common=common,
        )
    return ApiSpec(
        api_key=key,
        name=name,
        request=classes["Request"],
        response=classes["Response"],
        min_version=vr.lo,
        max_version=vr.hi,
        flexible_min=flexible_min,
    )
