"""Secrets never written: every line replay writes passes through here first.

The API key's value (and every secret header's) is replaced wherever it appears (a host that echoes request headers
in an error body, a key pasted into a body field), and body fields whose name is a secret's are redacted at any
depth. A host may echo a key in another form, so its common encodings are scrubbed too: JSON-escaped (``\\/``,
``\\u0073...``), URL-encoded (``%2B``, ``%2b``) and base64 (standard and URL-safe, at each of the three alignments a
key can have inside a longer encoded text). Text is often cut (an excerpt, a header kept to 300 characters), and a
key that straddles the cut leaves its start behind: a prefix of 8 characters or more that ends where a text was cut
(``...``, the end of a JSON string or of the text) is scrubbed too.

Body field names are matched whole (``api_key``, ``password``), never by substring: ``prompt_cache_key`` is an
affinity hint, not a secret. Header names are matched by what they say (``secret_header``): any header whose name
says auth, key, token, secret, password, credential, subscription, signature or cookie holds a secret
(``Ocp-Apim-Subscription-Key``, ``X-Auth-Token``, ``x-goog-api-key``).
"""

from __future__ import annotations

import base64
import re
from typing import Any
from urllib.parse import quote, quote_plus

REDACTED = "***"
SECRET_NAMES = {
    "api_key", "apikey", "api-key", "x-api-key", "key", "secret", "client_secret", "password", "passwd", "token",
    "access_token", "refresh_token", "id_token", "auth", "authorization", "bearer", "private_key", "credentials",
}  # fmt: skip
_SECRET_HEADER = re.compile(r"auth|key|token|secret|passw|credential|subscription|signature|cookie", re.IGNORECASE)
MIN_SECRET = 8  # shorter values would scrub innocent text (and a one-character "key" is no secret worth hiding)


def secret_header(name: str) -> bool:
    """Whether a header's name says it holds a secret."""
    return bool(_SECRET_HEADER.search(name))


def header_secrets(headers: dict[str, str]) -> list[str]:
    """The values of the secret headers (and each one's last word: ``Bearer KEY`` holds ``KEY``)."""
    out: list[str] = []
    for name, value in headers.items():
        if secret_header(name) and value.strip():
            out += [value, value.split()[-1]]
    return out


def redact_headers(headers: dict[str, str]) -> dict[str, str]:
    """``headers`` with every secret header's value replaced (what a run file's header may hold)."""
    return {name: REDACTED if secret_header(name) else value for name, value in headers.items()}


def encoded_forms(secret: str) -> set[str]:
    """``secret`` and the forms a host may echo it in: JSON-escaped, URL-encoded, base64 (the part of an encoded
    text that only the secret's bytes determine, at each alignment)."""
    forms = {secret, secret.replace("/", "\\/")}
    forms.add("".join(f"\\u{ord(c):04x}" for c in secret))
    forms.add("".join(f"\\u{ord(c):04X}" for c in secret))
    for url in (quote(secret, safe=""), quote_plus(secret, safe=""), quote(secret)):
        forms |= {url, re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), url)}
    raw = secret.encode()
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + raw).decode().rstrip("=")
        core = encoded[(0, 2, 3)[offset] : (8 * (offset + len(raw))) // 6]  # chars made of the secret's bits alone
        if len(core) >= MIN_SECRET:
            forms |= {core, core.replace("+", "-").replace("/", "_")}
    return {f for f in forms if len(f) >= MIN_SECRET}


class Scrubber:
    """Replaces every secret value, in its common encodings and cut short, with ``***`` (bytes or text)."""

    def __init__(self, secrets: list[str] | tuple[str, ...] = ()) -> None:
        originals = sorted({s for s in secrets if s and len(s) >= MIN_SECRET}, key=len, reverse=True)
        forms: set[str] = set()
        for s in originals:
            forms |= encoded_forms(s)
        self.values = sorted(forms, key=len, reverse=True)
        self._bytes = [v.encode() for v in self.values]
        # A secret's start left where a text was cut: an excerpt's "...", a JSON string's end, the text's end.
        prefixes = sorted({s[:k] for s in originals for k in range(MIN_SECRET, len(s))}, key=len, reverse=True)
        pattern = "|".join(map(re.escape, prefixes))
        self._cut = re.compile(f'(?:{pattern})(?=\\.\\.\\.|"|\\\\|$)') if prefixes else None
        self._cut_bytes = re.compile(self._cut.pattern.encode()) if self._cut is not None else None
        self._heads = [(s[:MIN_SECRET], s[:MIN_SECRET].encode()) for s in originals]

    def __bool__(self) -> bool:
        return bool(self.values)

    def line(self, data: bytes) -> bytes:
        for value in self._bytes:
            if value in data:
                data = data.replace(value, REDACTED.encode())
        if self._cut_bytes is not None and any(head in data for _, head in self._heads):
            data = self._cut_bytes.sub(REDACTED.encode(), data)
        return data

    def text(self, text: str) -> str:
        for value in self.values:
            if value in text:
                text = text.replace(value, REDACTED)
        if self._cut is not None and any(head in text for head, _ in self._heads):
            text = self._cut.sub(REDACTED, text)
        return text

    def value(self, obj: Any) -> Any:
        """``obj`` (JSON-like) with every secret value replaced inside its strings."""
        if not self.values:
            return obj
        if isinstance(obj, str):
            return self.text(obj)
        if isinstance(obj, dict):
            return {k: self.value(v) for k, v in obj.items()}
        if isinstance(obj, list):
            return [self.value(v) for v in obj]
        return obj


def redact_fields(obj: Any) -> Any:
    """``obj`` with the values of secret-named fields replaced, at any depth."""
    if isinstance(obj, dict):
        return {k: (REDACTED if str(k).lower() in SECRET_NAMES else redact_fields(v)) for k, v in obj.items()}
    if isinstance(obj, list):
        return [redact_fields(v) for v in obj]
    return obj
