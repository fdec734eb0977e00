"""mqtt_bridge."""
