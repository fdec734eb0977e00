"""TLS for the SSL and SASL_SSL listeners: a server context from Kafka's PEM settings,
and the principal a client certificate carries.

Kafka's PEM settings come in two forms and both are honoured: files
(``ssl.keystore.location``: key and certificate chain in one PEM file;
``ssl.truststore.location``) or the PEM text itself (``ssl.keystore.certificate.chain``
with ``ssl.keystore.key``; ``ssl.truststore.certificates``). Python's ``ssl`` loads a
key only from a file, so PEM text is written to a private temporary file for the
moment of loading and removed at once.
"""

from __future__ import annotations

import os
import re
import ssl
import tempfile
import textwrap
from collections.abc import Mapping
from typing import Any

__all__ = ["TlsSettingsError", "server_context", "subject_dn"]

_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.S)
# RFC 2253 short names, as Java's X500Principal.getName() prints them (Kafka's
# DefaultKafkaPrincipalBuilder uses that string for SSL principals).
_SHORT_NAMES = {
    "commonName": "CN", "localityName": "L", "stateOrProvinceName": "ST",
    "organizationName": "O", "organizationalUnitName": "OU", "countryName": "C",
    "streetAddress": "STREET", "domainComponent": "DC", "userId": "UID",
}
_OIDS = {"emailAddress": "1.2.840.113549.1.9.1", "serialNumber": "2.5.4.5", "title": "2.5.4.12",
         "surname": "2.5.4.4", "givenName": "2.5.4.42", "initials": "2.5.4.43",
         "generationQualifier": "2.5.4.44", "dnQualifier": "2.5.4.46", "pseudonym": "2.5.4.65",
         "businessCategory": "2.5.4.15", "postalCode": "2.5.4.17"}


class TlsSettingsError(ValueError):
    """The TLS settings cannot make a working server context; the message says why."""


def normalize_pem(text: str) -> str:
    """PEM text as Python's ssl wants it, also when Kafka's properties file joined the
    lines of a PEM value into one (continuation lines)."""
    blocks = []
    for label, body in _PEM_BLOCK.findall(text):
        headers = ""
        if ":" in body:  # an encrypted legacy key: "Proc-Type: ...\nDEK-Info: ...\n\n"
            lines = [line.strip() for line in body.strip().splitlines()]
            split = lines.index("") if "" in lines else 0
            headers = "\n".join(lines[:split]) + "\n\n" if split else ""
            body = "".join(lines[split:])
        data = "".join(body.split())
        blocks.append(f"-----BEGIN {label}-----\n{headers}{textwrap.fill(data, 64)}\n"
                      f"-----END {label}-----\n")
    if not blocks:
        raise TlsSettingsError("no PEM block (-----BEGIN ...-----) found")
    return "".join(blocks)


def server_context(settings: Mapping[str, Any]) -> ssl.SSLContext:
    """The context of a TLS listener from ``ssl.*`` settings (Kafka's names)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    versions = [_VERSIONS[v] for v in settings.get("ssl.enabled.protocols") or _VERSIONS]
    ctx.minimum_version, ctx.maximum_version = min(versions), max(versions)
    password = settings.get("ssl.key.password")
    location = settings.get("ssl.keystore.location")
    chain, key = settings.get("ssl.keystore.certificate.chain"), settings.get("ssl.keystore.key")
    if location and (chain or key):
        raise TlsSettingsError("set either ssl.keystore.location or ssl.keystore.certificate.chain "
                               "with ssl.keystore.key, not both")
    try:
        if location:
            ctx.load_cert_chain(location, password=password)
        elif chain and key:
            _load_pem_text(ctx, normalize_pem(chain), normalize_pem(key), password)
        elif chain or key:
            raise TlsSettingsError("ssl.keystore.certificate.chain and ssl.keystore.key go together")
        else:
            raise TlsSettingsError("a TLS listener needs ssl.keystore.location (a PEM file with the "
                                   "private key and certificate chain) or "
                                   "ssl.keystore.certificate.chain with ssl.keystore.key")
    except FileNotFoundError as exc:
        raise TlsSettingsError(f"ssl.keystore.location {location}: {exc.strerror}") from exc
    except ssl.SSLError as exc:
        raise TlsSettingsError(f"cannot load the keystore ({_reason(exc)}; a wrong "
                               f"ssl.key.password, or not a PEM key and certificate)") from exc
    _load_truststore(ctx, settings)
    return ctx


def _load_truststore(ctx: ssl.SSLContext, settings: Mapping[str, Any]) -> None:
    client_auth = settings.get("ssl.client.auth") or "none"
    location = settings.get("ssl.truststore.location")
    certificates = settings.get("ssl.truststore.certificates")
    try:
        if location:
            ctx.load_verify_locations(cafile=location)
        if certificates:
            ctx.load_verify_locations(cadata=normalize_pem(certificates))
    except FileNotFoundError as exc:
        raise TlsSettingsError(f"ssl.truststore.location {location}: {exc.strerror}") from exc
    except ssl.SSLError as exc:
        raise TlsSettingsError(f"cannot load the truststore ({_reason(exc)})") from exc
    trusted = bool(location or certificates)
    if client_auth != "none" and not trusted:
        raise TlsSettingsError(f"ssl.client.auth={client_auth} needs ssl.truststore.location or "
                               "ssl.truststore.certificates (the CAs that sign client certificates)")
    ctx.verify_mode = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
                       "required": ssl.CERT_REQUIRED}[client_auth]


def _load_pem_text(ctx: ssl.SSLContext, chain: str, key: str, password: str | None) -> None:
    with tempfile.TemporaryDirectory(prefix="logserver-tls-") as directory:
        cert_path, key_path = os.path.join(directory, "chain.pem"), os.path.join(directory, "key.pem")
        for path, text in ((cert_path, chain), (key_path, key)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as handle:
                handle.write(text)
        ctx.load_cert_chain(cert_path, key_path, password=password)


def _reason(exc: ssl.SSLError) -> str:
    return str(exc.reason or exc.strerror or exc).lower().replace("_", " ")


def subject_dn(peercert: Mapping[str, Any] | None) -> str | None:
    """The subject of a verified client certificate as Kafka names SSL principals:
    RFC 2253, most specific first (``CN=alice,OU=dev,O=acme,C=DE``)."""
    if not peercert or not peercert.get("subject"):
        return None
    rdns = []
    for rdn in reversed(peercert["subject"]):
        parts = []
        for name, value in rdn:
            key = _SHORT_NAMES.get(name) or _OIDS.get(name, name)
            parts.append(f"{key}={_escape(str(value))}")
        rdns.append("+".join(parts))
    return ",".join(rdns)


def _escape(value: str) -> str:
    out = []
    for index, char in enumerate(value):
        if char in ',+"\\<>;' or (index == 0 and char in "# ") or (
                index == len(value) - 1 and char == " "):
            out.append("\\" + char)
        else:
            out.append(char)
    return "".join(out)
