"""Test-only helpers shared by the suite and the benchmarks: servers, bridges,
clusters, clients, a PKI, fault injection and fuzzing harnesses. Never imported by
the production packages."""
