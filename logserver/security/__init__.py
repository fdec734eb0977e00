"""Kafka listener security: TLS, SASL authentication, SCRAM credentials, principals.

Each listener has a security protocol (Kafka's ``PLAINTEXT``, ``SSL``,
``SASL_PLAINTEXT``, ``SASL_SSL``); every connection carries a
:class:`~logserver.security.session.ConnectionSecurity` that says who the client is and
what it may send before it has authenticated. The SASL and SCRAM state machines are
sans-I/O; the network layer only asks them what to do with each frame.
"""
