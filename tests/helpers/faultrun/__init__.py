"""A randomized fault run over a 3-broker cluster, judged by a checker (issue 21, item 11).

- ``history``: what the workloads saw (acknowledged records, transaction outcomes,
  acknowledged commits, reads), the checker's input.
- ``checker``: the five properties over a history; pure, unit-tested on bad histories.
- ``schedule``: the seeded nemesis plan (fault kinds and target roles).
- ``workloads``: idempotent acks=all producers, a transactional producer sending offsets
  to a group coordinated elsewhere, a continuously committing consumer, readers.
- ``nemesis``: carries out a planned fault on the running cluster and waits it out.
- ``run``: one run end to end, shared by tests/cluster/test_faultrun.py (short: one fault
  of each kind) and ``python -m benchmarks.fault_run`` (long).
"""
