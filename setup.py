"""Build the optional compiled parts; the rest is in pyproject.toml.

- ``kafkaproto._recordwalk`` and ``kafkaproto._recordbuild`` (C): without a C compiler
  the install still succeeds and kafkaproto.validate and kafkaproto.records fall back to
  pure Python (slower, same bytes).
- The MQTT bridge's codec and routing modules, compiled by mypyc (``MYPYC_MODULES``):
  16-22% more messages per second through the bridge (benchmarks/README.md, "mypyc").
  All or nothing: if any of them fails to build, none is installed and the ``.py`` files
  run (``MQTT_BRIDGE_COMPILE=0`` skips the step; mqtt_bridge/compiled.py falls back to
  the sources when one is edited after the build).
"""

from __future__ import annotations

import os
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

MYPYC_MODULES = [
    "mqtt_bridge/codec/constants.py",
    "mqtt_bridge/codec/errors.py",
    "mqtt_bridge/codec/primitives.py",
    "mqtt_bridge/codec/properties.py",
    "mqtt_bridge/codec/packets.py",
    "mqtt_bridge/codec/topics.py",
    "mqtt_bridge/codec/decoder.py",
    "mqtt_bridge/codec/encoder.py",
    "mqtt_bridge/subscriptions.py",
]
#: the build's shared library: mqtt_bridge/_compiled__mypyc, inside the package
MYPYC_GROUP = "mqtt_bridge._compiled"


def mypyc_extensions() -> list[Extension]:
    if os.environ.get("MQTT_BRIDGE_COMPILE", "1") == "0":
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        print("mypyc not available: the MQTT bridge runs as pure Python")
        return []
    try:
        extensions = mypycify(MYPYC_MODULES, opt_level="3", group_name=MYPYC_GROUP)
    except Exception as exc:  # mypyc refused the sources: run them as they are
        print(f"mypyc failed ({exc}): the MQTT bridge runs as pure Python")
        return []
    for ext in extensions:
        ext.mypyc = True  # type: ignore[attr-defined]
    return extensions


class BuildExt(build_ext):
    """Optional extensions as usual; the mypyc ones all together or not at all (a
    module compiled without its shared library would not import)."""

    def build_extensions(self) -> None:
        mypyc = [e for e in self.extensions if getattr(e, "mypyc", False)]
        others = [e for e in self.extensions if e not in mypyc]
        self.extensions = others
        super().build_extensions()
        try:
            for ext in mypyc:
                self.build_extension(ext)
        except Exception as exc:
            print(f"compiling the MQTT bridge failed ({exc}): it runs as pure Python")
            for ext in mypyc:
                Path(self.get_ext_fullpath(ext.name)).unlink(missing_ok=True)
            mypyc = []
        self.extensions = others + mypyc  # what is copied and installed


setup(
    cmdclass={"build_ext": BuildExt},
    ext_modules=[
        Extension(
            "kafkaproto._recordwalk",
            ["kafkaproto/_recordwalk.c"],
            extra_compile_args=["-O2"],
            optional=True,
        ),
        # The producer side's records encoding (build_batch); same fallback rule.
        Extension(
            "kafkaproto._recordbuild",
            ["kafkaproto/_recordbuild.c"],
            extra_compile_args=["-O2"],
            optional=True,
        ),
        *mypyc_extensions(),
    ],
)
