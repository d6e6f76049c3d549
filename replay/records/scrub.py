"""Secrets never written: every line replay writes passes through here first.

The API key's value is replaced wherever it appears (a host that echoes request headers in an error body, a key
pasted into a body field), and body fields whose name is a secret's are redacted at any depth. Names are matched
whole (``api_key``, ``password``), never by substring: ``prompt_cache_key`` is an affinity hint, not a secret.
"""

from __future__ import annotations

from typing import Any

REDACTED = "***"
SECRET_NAMES = {
    "api_key", "apikey", "api-key", "x-api-key", "key", "secret", "client_secret", "password", "passwd", "token",
    "access_token", "refresh_token", "id_token", "auth", "authorization", "bearer", "private_key", "credentials",
}  # fmt: skip


class Scrubber:
    """Replaces every secret value (bytes or text) with ``***``."""

    def __init__(self, secrets: list[str] | tuple[str, ...] = ()) -> None:
        # Short values would scrub innocent text (and a one-character "key" is no secret worth hiding).
        self.values = sorted({s for s in secrets if s and len(s) >= 8}, key=len, reverse=True)
        self._bytes = [v.encode() for v in self.values]

    def __bool__(self) -> bool:
        return bool(self.values)

    def line(self, data: bytes) -> bytes:
        for value in self._bytes:
            if value in data:
                data = data.replace(value, REDACTED.encode())
        return data

    def text(self, text: str) -> str:
        for value in self.values:
            text = text.replace(value, REDACTED)
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
