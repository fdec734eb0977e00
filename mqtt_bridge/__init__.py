"""MQTT bridge: an MQTT 3.1.1/5.0 server for devices in front of a Kafka-protocol log."""

from mqtt_bridge.compiled import prefer_sources_when_stale

prefer_sources_when_stale()  # before any compiled module is imported
