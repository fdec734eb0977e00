"""Coverage-guided fuzzing (atheris/libFuzzer) of the decoders that read hostile bytes.

Each harness in tests/helpers/fuzz/ runs in its own subprocess for a bounded time, starting from a
seed corpus generated from the codecs' own encoders; any crash (an exception other than the
decoder's documented error, a broken property, a libFuzzer timeout, RSS over the limit)
fails the test with the crashing input. ``FUZZ_SECONDS`` (default 8 per harness) sets the
budget; benchmarks/fuzz_long.py is the long run.
"""

from __future__ import annotations

import os

import pytest
from helpers.fuzz import runner

from kafkaproto import validate

SECONDS = int(os.environ.get("FUZZ_SECONDS", "8"))

pytestmark = [pytest.mark.timeout(SECONDS + 180)]


def test_compiled_walk_is_fuzzed_against_the_python_walk():
    """The walk-agreement property needs the C extension (setup.py builds it)."""
    from helpers.fuzz import record_batches

    assert validate.WALK_IMPLEMENTATION == "c"
    assert record_batches.compiled_walk is not None


@pytest.mark.parametrize("harness", runner.HARNESSES)
def test_fuzz(harness, tmp_path, record_property):
    result = runner.run(harness, tmp_path, seconds=SECONDS)
    record_property("fuzz", f"{result.executions} executions, cov {result.coverage}")
    assert not result.crashed, result.report()
    assert result.coverage > 0 and result.executions > 1000, result.report()


def test_a_crash_is_reported_with_its_input(tmp_path):
    result = runner.run("canary", tmp_path, seconds=30)
    assert result.crashed
    assert result.crash is not None and result.crash.startswith(b"FUZZ"), result.report()
    assert "planted bug" in result.output
