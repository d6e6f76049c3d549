"""Where requests go and how: base URL, API flavour, model, where the key comes from, limits.

The API key is read from the environment when a client is made and never stored here, so nothing that writes a
``HostConfig`` (the run file's header) can write the key.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from replay.records.scrub import redact_headers

DEFAULT_MAX_RESPONSE_BYTES = 64 << 20  # far above any real answer; a longer one is cut and classified


@dataclass(frozen=True, slots=True)
class HostConfig:
    """One host as a run talks to it."""

    base_url: str
    model: str
    api: str = "chat"  # chat | completions | responses | anthropic
    api_key_env: str = "OPENAI_API_KEY"
    request_timeout_s: float = 600.0  # whole call
    stall_timeout_s: float = 120.0  # longest silence between two reads
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES
    dialect: str | None = None  # the provider whose fields and options apply (a preset's name), if any
    headers: dict[str, str] = field(default_factory=dict)  # sent with every call; {session}/{task} filled per call
    connection: str = "session"  # session: kept-alive connections reused | per-request: a new one for every call
    follow_redirects: bool = False  # --follow-redirects: within the origin only (never with the key elsewhere)
    resend_stale: bool = True  # a call on a kept-alive connection the host had closed is sent again, once (not
    # with --retries 0: no call is ever sent twice then)
    source_addresses: tuple[str, ...] = ()  # local addresses the connections leave from, lanes dealt over them
    ca_bundle: str | None = None  # --ca-bundle: the CA certificates (PEM) a https host's certificate must chain to
    insecure: bool = False  # --insecure: no TLS verification at all (warned about; in the header)
    transport: str = "http"  # http | websocket (Responses only: one socket per session, response.create per turn)

    def api_key(self) -> str | None:
        return os.environ.get(self.api_key_env) or None

    def public(self) -> dict[str, Any]:
        """What may be written to a run file: no secrets, only where the key would come from."""
        return {
            "base_url": self.base_url,
            "api": self.api,
            "model": self.model,
            "api_key_env": self.api_key_env,
            "api_key_set": self.api_key() is not None,
            "request_timeout_s": self.request_timeout_s,
            "stall_timeout_s": self.stall_timeout_s,
            "max_response_bytes": self.max_response_bytes,
            "dialect": self.dialect,
            "headers": redact_headers(self.headers),
            "connection": self.connection,
            "follow_redirects": self.follow_redirects,
            "resend_stale": self.resend_stale,
            **({"source_addresses": list(self.source_addresses)} if self.source_addresses else {}),
            "ca_bundle": self.ca_bundle,
            "insecure": self.insecure,
            "transport": self.transport,
        }


CONNECTIONS = ("session", "per-request")
TRANSPORTS = ("http", "websocket")
_SECRET_PARAM = re.compile(r"key|token|secret|auth|password|sig", re.IGNORECASE)


_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # a header's name (RFC 9110, 5.1)


def header_problem(name: str, value: str) -> str | None:
    """Why ``name: value`` cannot be sent as an HTTP header, or None: a name is a token, a value holds no control
    character but tab (RFC 9110, 5.5). A line break or NUL would smuggle a second header in; any other control
    character is refused by the host, and every call would fail. The value is never quoted (it may be a key)."""
    if not _TOKEN.fullmatch(name):
        return "a header's name is letters, digits and !#$%&'*+-.^_`|~ only"
    bad = next((c for c in value if (c < " " and c != "\t") or c == "\x7f"), None)
    if bad is not None:
        return f"a header may not hold a line break, NUL or other control character (U+{ord(bad):04X} in its value)"
    return None


def check_url(url: str) -> None:
    """ValueError when ``url`` is no http(s) URL, or carries credentials (they would end up in logs and run files):
    user:password@, a key in its query, anything after ``#``."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:  # the URL is not echoed: it may hold a key
        raise ValueError("expected an http:// or https:// base URL, such as http://127.0.0.1:8000/v1")
    if parts.username or parts.password:
        raise ValueError("the URL carries credentials (user:password@): pass the key through --api-key-env instead")
    if any(_SECRET_PARAM.search(name) for name, _ in parse_qsl(parts.query, keep_blank_values=True)):
        raise ValueError("the URL carries a key in its query: pass the key through --api-key-env instead")
    if "#" in url:  # never sent to a host: whatever follows it would only reach the screen and the run file
        raise ValueError("the URL carries a fragment (#...): pass the key through --api-key-env instead")
