"""Throughput benchmarks for logserver, printed as ratios against same-run baselines.

The machines this runs on are shared and noisy, so absolute figures mean little on
their own: every run also measures raw loopback-socket and file-append bandwidth and
reports each workload as a fraction of them (and, with ``--peers``, against peer
brokers started in the same run). Run ``python -m benchmarks --help``.

Layout, so the suite can grow (issue 7) without reshaping:

- ``targets``: a server under test (ours as a subprocess, an external one, peers).
- ``peers``: installing peer brokers from the benchmark's own set-up path.
- ``baselines``: raw loopback socket and file append bandwidth.
- ``workloads``: Kafka-client workloads, one function each, returning ``WorkloadResult``.
- ``kafka_raw``: the project's blocking client (``commonlib.kafkaclient``) with streamed reads, for the server-path figures
  (raw produce of ready-made batches, raw catch-up fetch, idle connections).
- ``mqtt_bench``: the MQTT workloads against the bridge and peer MQTT servers.
- ``runner``: runs baselines, then every workload against every target, then MQTT.
- ``checks``: the issue's targets, PASS/FAIL on the run's own figures.
- ``report``: the printed table and the JSON result file; ``plots``: one PNG per
  workload; ``markdown``: the README's tables from a result file.
"""
