"""Code the project's programs share: ``logserver``, ``mqtt-bridge`` and the Spark demo.

The server and the bridge are two independent programs: neither imports the other (the
server runs the bridge as a child process, tests/unit/test_program_boundary.py checks
it), and what both need lives here: the one log format, latency histograms, TLS
listeners that see their failed handshakes, per-address login and connection limits,
the admin listeners' Host check, child processes, and the bridge's exit codes its
supervisor reads. Nothing here imports ``logserver`` or ``mqtt_bridge``.
"""
