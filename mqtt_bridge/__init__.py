"""MQTT bridge: an MQTT 3.1.1/5.0 server for devices in front of a Kafka-protocol log."""
