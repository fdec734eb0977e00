"""Build the optional compiled record walk; everything else lives in pyproject.toml.

``optional=True``: without a C compiler the install still succeeds and
kafkaproto.validate falls back to its pure-Python walk (slower, same answers).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "kafkaproto._recordwalk",
            ["kafkaproto/_recordwalk.c"],
            extra_compile_args=["-O2"],
            optional=True,
        )
    ]
)
