"""``API_SPECS``: api key -> :class:`~kafkaproto.spec.ApiSpec`, for dispatch by key."""

from __future__ import annotations

from collections.abc import Mapping

from .code_cache import save as save_code_cache
from .messages import ALL_APIS
from .spec import ApiSpec

__all__ = ["API_SPECS", "ApiSpec", "precompile"]

#: Every API this codec declares, by key. The server picks what to advertise.
API_SPECS: dict[int, ApiSpec] = {spec.api_key: spec for spec in ALL_APIS}


def precompile(versions: Mapping[int, tuple[int, int]] | None = None) -> int:
    """Compile codecs ahead of the first request; returns how many (4 per version).

    Codecs are otherwise generated lazily, which costs the first request of
    each (API, version) about a millisecond. ``versions`` maps api key to the
    (min, max) range to prepare (e.g. what the server advertises); default:
    every declared version of every API. What had to be compiled is kept on disk
    for the next process (:mod:`kafkaproto.code_cache`).
    """
    count = 0
    for key, spec in API_SPECS.items():
        lo, hi = (spec.min_version, spec.max_version)
        if versions is not None:
            if key not in versions:
                continue
            lo, hi = max(lo, versions[key][0]), min(hi, versions[key][1])
        for version in range(lo, hi + 1):
            for cls in (spec.request, spec.response):
                cls.encoder(version)
                cls.decoder(version)
                count += 2
    save_code_cache()
    return count
