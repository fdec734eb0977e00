"""Build the optional compiled record walk and record encoder; the rest is in pyproject.toml.

``optional=True``: without a C compiler the install still succeeds and
kafkaproto.validate and kafkaproto.records fall back to pure Python (slower, same bytes).
"""

from setuptools import Extension, setup

setup(
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
    ]
)
