"""Helpers shared by the tests and the benchmarks (never imported by production code).

- ``mqtt_client``: a minimal asyncio MQTT client, the load generator of thousands of devices.
- ``mqtt_procs``: mqtt-bridge and mosquitto as child processes (``logserver.childproc``).
- ``kafka_samples``: fully populated sample messages of any Kafka API and version.

Tests import it as ``support`` (tests/ is on their path), benchmarks as ``tests.support``;
its modules import each other relatively so both work.
"""
