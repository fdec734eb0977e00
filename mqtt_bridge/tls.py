"""The TLS listener's context and the identity a client certificate carries."""

from __future__ import annotations

import ssl
from typing import Any


def server_context(
    certfile: str, keyfile: str | None, cafile: str | None, require_certificate: bool
) -> ssl.SSLContext:
    """TLS 1.2+; with ``cafile`` client certificates are verified (and, if required, demanded)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(certfile, keyfile)
    if cafile:
        ctx.load_verify_locations(cafile)
        ctx.verify_mode = ssl.CERT_REQUIRED if require_certificate else ssl.CERT_OPTIONAL
    elif require_certificate:
        raise ValueError("require_certificate needs tls_cafile (the CA that signs client certificates)")
    return ctx


def certificate_cn(peercert: dict[str, Any] | None) -> str | None:
    """The subject's common name of a verified peer certificate (``getpeercert()``)."""
    if not peercert:
        return None
    for rdn in peercert.get("subject", ()):
        for name, value in rdn:
            if name == "commonName":
                return str(value)
    return None
