"""Sans-I/O Kafka wire protocol: bytes in, typed objects out, and back."""
