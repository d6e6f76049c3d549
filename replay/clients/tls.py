"""TLS for every connection a run makes: the system's trust store, a private CA bundle (``--ca-bundle FILE``), or no
verification at all (``--insecure``: loud, and written in the run's header).

The standard library's ``ssl`` does the work (aiohttp takes its context); nothing here is on the per-read path. A
handshake that fails is told apart from a connection that failed (error class ``tls``, never retried: the same
certificate fails the same way), with what to do about it.
"""

from __future__ import annotations

import ssl
from pathlib import Path

import aiohttp

from replay.errors import ReplayError

INSECURE_WARNING = (
    "warning: --insecure: the host's TLS certificate is not verified; anyone on the path can read and change the "
    "calls (and the API key). Use --ca-bundle FILE for a private CA"
)


class TlsError(ReplayError, ValueError):
    """A CA bundle that cannot be used, naming the option and the file."""


def context(ca_bundle: str | None, insecure: bool) -> ssl.SSLContext | bool:
    """What aiohttp's connector takes as ``ssl``: True for the system's trust store, a context trusting
    ``ca_bundle`` (and nothing else), or False (no verification)."""
    if insecure:
        return False
    if ca_bundle is None:
        return True
    return bundle_context(ca_bundle)


def bundle_context(path: str) -> ssl.SSLContext:
    """A client context that trusts the certificates in ``path`` (PEM); TlsError naming the file otherwise."""
    p = Path(path)
    if not p.is_file():
        raise TlsError(f"--ca-bundle: {path}: no such file")
    try:
        return ssl.create_default_context(cafile=str(p))
    except (ssl.SSLError, OSError, ValueError) as exc:
        raise TlsError(f"--ca-bundle: {path}: not a PEM bundle of CA certificates ({exc})") from None


def is_tls_error(exc: BaseException) -> bool:
    """Whether a client error is the TLS handshake's (a certificate not trusted, a protocol mismatch)."""
    return isinstance(exc, aiohttp.ClientSSLError | ssl.SSLError)


def tls_detail(exc: BaseException) -> str:
    """What a failed handshake says, and what to do about it."""
    reason = getattr(exc, "certificate_error", None) or getattr(exc, "os_error", None) or exc
    text = f"TLS handshake failed: {type(reason).__name__}: {reason}"
    if isinstance(exc, aiohttp.ClientConnectorCertificateError) or "CERTIFICATE_VERIFY_FAILED" in str(exc):
        text += "; the host's certificate is not trusted: pass --ca-bundle FILE (its CA), or --insecure"
    return text
