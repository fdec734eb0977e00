"""Coverage-guided fuzzing (atheris/libFuzzer) of the decoders that read hostile bytes.

Each harness in tests/helpers/fuzz/ runs in its own subprocess for a fixed number of inputs with a
fixed seed (the same inputs however loaded the machine, no time limit: under load the
harness's start-up alone outlasted the old 8 s + 120 s subprocess limit), starting from a
seed corpus generated from the codecs' own encoders; any crash (an exception other than the
decoder's documented error, a broken property, a libFuzzer timeout, RSS over the limit)
fails the test with the crashing input. ``FUZZ_RUNS`` scales the budget (1.0: the counts
below, a few seconds each on an idle 2-core machine); benchmarks/fuzz_long.py is the long
run (minutes per harness).
"""

from __future__ import annotations

import os

import pytest
from helpers.fuzz import runner

from kafkaproto import validate

SCALE = float(os.environ.get("FUZZ_RUNS", "1"))
#: Inputs per harness (libFuzzer -runs, the seed corpus included): about 2 s of each on an
#: idle machine (exec/s in docs/testing.md).
RUNS = {"kafka_requests": 20_000, "record_batches": 10_000, "mqtt_packets": 3_000}
SEED = 1

pytestmark = [pytest.mark.timeout(600)]


def test_compiled_walk_is_fuzzed_against_the_python_walk():
    """The walk-agreement property needs the C extension (setup.py builds it)."""
    from helpers.fuzz import record_batches

    assert validate.WALK_IMPLEMENTATION == "c"
    assert record_batches.compiled_walk is not None


@pytest.mark.parametrize("harness", runner.HARNESSES)
def test_fuzz(harness, tmp_path, record_property):
    runs = max(int(RUNS[harness] * SCALE), 1000)
    result = runner.run(harness, tmp_path, runs=runs, seed=SEED)
    record_property("fuzz", f"{result.executions} executions, cov {result.coverage}")
    assert not result.crashed, result.report()
    assert result.coverage > 0 and result.executions == runs, result.report()


def test_a_crash_is_reported_with_its_input(tmp_path):
    result = runner.run("canary", tmp_path, runs=1_000_000, seed=SEED)
    assert result.crashed
    assert result.crash is not None and result.crash.startswith(b"FUZZ"), result.report()
    assert "planted bug" in result.output
