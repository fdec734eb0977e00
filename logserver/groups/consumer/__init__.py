"""The consumer group protocol of KIP-848, beside the classic one (``logserver/groups``).

- ``assignors``: server-side ``uniform`` and ``range`` assignors, pure functions.
- ``model``: one group's members, epochs and target assignment.
- ``reconcile``: moving one member from its current assignment toward its target
  (Kafka's CurrentAssignmentBuilder): revoke before assign.
- ``machine``: heartbeats, leaves, timers, metadata changes: the sans-I/O state machine.
- ``records``: Kafka's ``__consumer_offsets`` records of consumer groups (types 3, 5-8).
"""
