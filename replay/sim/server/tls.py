"""HTTPS for the simulated host (``replay sim --tls``): a self-signed certificate made for 127.0.0.1 and localhost.

The certificate is made by the ``openssl`` command, present wherever Python's ssl module is built (no package for a
test host's certificate in the core install); the client trusts it with ``--ca-bundle CERT``. The key never leaves
the directory it was made in (a fresh private one unless ``--tls-dir`` names one).
"""

from __future__ import annotations

import shutil
import ssl
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from replay.errors import ReplayError


class SimTlsError(ReplayError, RuntimeError):
    """The certificate could not be made (no openssl command, or it failed), said in one line."""


@dataclass(frozen=True, slots=True)
class TlsFiles:
    cert: Path  # PEM: the certificate, which is also the CA a client trusts (--ca-bundle)
    key: Path

    def context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(self.cert, self.key)
        return ctx


def self_signed(directory: str | Path | None = None, days: int = 7) -> TlsFiles:
    """A new self-signed certificate and key for 127.0.0.1 and localhost, in ``directory`` (default: a new private
    temporary directory), valid ``days``."""
    openssl = shutil.which("openssl")
    if openssl is None:
        raise SimTlsError("--tls needs the openssl command to make the simulated host's certificate; none is on PATH")
    where = Path(directory) if directory else Path(tempfile.mkdtemp(prefix="replay-sim-tls-"))
    where.mkdir(parents=True, exist_ok=True)
    files = TlsFiles(where / "sim-cert.pem", where / "sim-key.pem")
    cmd = [openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
           "-keyout", str(files.key), "-out", str(files.cert), "-days", str(days), "-subj", "/CN=replay-sim",
           "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
           "-addext", "basicConstraints=critical,CA:TRUE"]  # fmt: skip
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SimTlsError(f"--tls: openssl could not make a certificate ({exc})") from None
    if done.returncode != 0 or not files.cert.is_file():
        raise SimTlsError(f"--tls: openssl could not make a certificate: {done.stderr.strip()[:300]}")
    files.key.chmod(0o600)
    return files
