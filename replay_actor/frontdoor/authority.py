"""The run's certificate authority: HTTPS to a tool host terminated at the front door
(docs/tools.md, "The certificate authority").

Runs in: the ``run`` process. :class:`RunAuthority` owns, for one run:

- an owner-only temporary folder (``0700``), removed when the run ends;
- an ephemeral certificate authority made with ``cryptography`` (an EC P-256 key that
  lives in this process's memory only and is never written anywhere), and one leaf key
  shared by every host's certificate: written to the folder (``0600``, the only way
  Python's ``ssl`` loads a key) and removed with it;
- each host's certificate (a DNS name, or an IP address as an IP SAN), made on first
  use and kept, and the server-side TLS context that presents it;
- the bundle the child is told to trust (``SSL_CERT_FILE``, ``REQUESTS_CA_BUNDLE``,
  ``CURL_CA_BUNDLE``, ``NODE_EXTRA_CA_CERTS``): the roots ``run`` itself trusts (its own
  ``SSL_CERT_FILE`` when set, else the system's) and the run's authority after them;
- the client-side context a recording verifies each tool host with: those same roots,
  without the run's authority.

Only the bundle and the certificates (public) are read by the child; the keys never
leave the folder, and a run killed with SIGKILL leaves a folder whose authority no
other run or client trusts.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import shutil
import ssl
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ec import EllipticCurvePrivateKey
    from cryptography.x509 import Certificate

__all__ = ["CA_VARIABLES", "RunAuthority", "trusted_roots"]

#: The variables pointed at the bundle: what Python (ssl, httpx), requests, curl and
#: Node read their trusted roots from.
CA_VARIABLES: Final = (
    "SSL_CERT_FILE",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
)
#: A certificate is valid from long ago (a child whose clock is set back still trusts
#: it) to a year ahead (no run lasts that long; some clients refuse more than 398 days).
_NOT_BEFORE: Final = datetime.datetime(2000, 1, 1, tzinfo=datetime.UTC)
_LIFETIME: Final = datetime.timedelta(days=365)


def _pem_certificates(path: str) -> Iterator[bytes]:
    """The PEM blocks of one file (each ending with its END line)."""
    data = Path(path).read_bytes()
    end = b"-----END CERTIFICATE-----"
    for block in data.split(end)[:-1]:
        start = block.find(b"-----BEGIN CERTIFICATE-----")
        if start >= 0:
            yield block[start:] + end + b"\n"


def trusted_roots() -> bytes:
    """The roots this process trusts, as PEM: its ``SSL_CERT_FILE`` when set, else the
    system's file, else the system's folder of certificates (OpenSSL's defaults, as
    ``ssl.get_default_verify_paths`` reports them); empty when there are none."""
    paths = ssl.get_default_verify_paths()
    if paths.cafile:
        return b"".join(_pem_certificates(paths.cafile))
    if not paths.capath:
        return b""
    blocks: dict[bytes, None] = {}
    for entry in sorted(os.scandir(paths.capath), key=lambda e: e.name):
        if entry.is_file():
            try:
                blocks.update(dict.fromkeys(_pem_certificates(entry.path)))
            except OSError:
                continue  # an unreadable entry is not a root we trust
    return b"".join(blocks)


def _private_key() -> EllipticCurvePrivateKey:
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


def _name(common: str) -> Any:
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "replay-actor"),
            x509.NameAttribute(NameOID.COMMON_NAME, common[:64]),
        ]
    )


def _make_authority(key: EllipticCurvePrivateKey) -> Certificate:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes

    name = _name(f"replay-actor run {os.getpid()} authority")
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(_NOT_BEFORE)
        .not_valid_after(now + _LIFETIME)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )


class RunAuthority:
    """``RunAuthority()``: one run's authority, folder and bundle (see the module
    docstring); ``close()`` removes the folder. Thread-safe."""

    def __init__(self) -> None:
        from cryptography.hazmat.primitives import serialization

        self.folder = tempfile.mkdtemp(prefix="replay-actor-run-")  # 0700
        try:
            self._ca_key = _private_key()
            self._ca = _make_authority(self._ca_key)
            self._leaf_key = _private_key()
            self._leaf_key_path = self._write(
                "leaf-key.pem",
                self._leaf_key.private_bytes(
                    serialization.Encoding.PEM,
                    serialization.PrivateFormat.PKCS8,
                    serialization.NoEncryption(),
                ),
            )
            ca_pem = self._ca.public_bytes(serialization.Encoding.PEM)
            self.certificate = self._write("authority.pem", ca_pem)
            roots = trusted_roots()
            self.bundle = self._write("bundle.pem", roots + b"\n" + ca_pem)
        except BaseException:
            shutil.rmtree(self.folder, ignore_errors=True)
            raise
        self._contexts: dict[str, ssl.SSLContext] = {}
        self._lock = threading.Lock()

    def _write(self, name: str, data: bytes) -> str:
        path = os.path.join(self.folder, name)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        return path

    def variables(self) -> dict[str, str]:
        """The child's trust variables, each naming the bundle."""
        return dict.fromkeys(CA_VARIABLES, self.bundle)

    def server_context(self, host: str) -> ssl.SSLContext:
        """The TLS context that presents ``host``'s certificate (made on first use)."""
        host = host.lower()
        with self._lock:
            context = self._contexts.get(host)
            if context is None:
                context = self._contexts[host] = self._context_for(host)
            return context

    def _context_for(self, host: str) -> ssl.SSLContext:
        from cryptography.hazmat.primitives import serialization

        leaf = self._leaf(host)
        path = self._write(
            f"host-{len(self._contexts)}.pem", leaf.public_bytes(serialization.Encoding.PEM)
        )
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(path, self._leaf_key_path)
        # HTTP/1.1 only: the front door's server speaks nothing else.
        context.set_alpn_protocols(["http/1.1"])
        return context

    def _leaf(self, host: str) -> Certificate:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes
        from cryptography.x509.oid import ExtendedKeyUsageOID

        try:
            alt: x509.GeneralName = x509.IPAddress(ipaddress.ip_address(host))
        except ValueError:
            alt = x509.DNSName(host)
        now = datetime.datetime.now(datetime.UTC)
        return (
            x509.CertificateBuilder()
            .subject_name(_name(host))
            .issuer_name(self._ca.subject)
            .public_key(self._leaf_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(_NOT_BEFORE)
            .not_valid_after(now + _LIFETIME)
            .add_extension(x509.SubjectAlternativeName([alt]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self._ca_key.public_key()),
                critical=False,
            )
            .sign(self._ca_key, hashes.SHA256())
        )

    @staticmethod
    def client_context() -> ssl.SSLContext:
        """How a recording verifies a tool host: the roots ``run`` trusts (the same the
        bundle starts with), never the run's own authority."""
        return ssl.create_default_context()

    def close(self) -> None:
        """Remove the folder (the leaf key, the certificates, the bundle). Idempotent."""
        shutil.rmtree(self.folder, ignore_errors=True)

    def __repr__(self) -> str:
        return "<RunAuthority>"
