"""Coverage-guided fuzz harnesses (atheris/libFuzzer) for the decoders that read hostile bytes.

One module per target, each with ``seeds()`` (a seed corpus built at run time from the
codecs' own encoders, so no binaries are committed) and ``test_one_input(data)`` (one
input, asserting the target's properties; any other exception is a crash). ``common.main``
turns a module into a libFuzzer program; ``runner`` runs one in a subprocess and parses
what libFuzzer prints. tests/integration/test_fuzz_codecs.py runs each for a bounded time;
benchmarks/fuzz_long.py runs them for minutes.
"""
