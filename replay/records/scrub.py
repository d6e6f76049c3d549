"""Secrets never written: every line replay writes passes through here first.

The API key's value (and every secret header's) is replaced wherever it appears (a host that echoes request headers
in an error body, a key pasted into a body field), and body fields whose name is a secret's are redacted at any
depth. A host may echo a key in another form, so its common encodings are scrubbed too: JSON-escaped (``\\/``,
``\\u0073...``), URL-encoded (``%2B``, ``%2b``) and base64 (standard and URL-safe, at each of the three alignments a
key can have inside a longer encoded text). Text is often cut (an excerpt, a header kept to 300 characters), and a
key that straddles the cut leaves its start behind: a prefix of 8 characters or more that ends where a text was cut
(``...``, the end of a JSON string or of the text) is scrubbed too.

A host may also echo a key in part: its first characters ``\\u``-escaped, split over two header values, upper-cased.
So any run of ``MIN_RUN`` (12) or more consecutive characters of a secret is scrubbed too, its ASCII letters in any
case, matched after JSON escapes (``\\uXXXX``, ``\\/``, at any depth of escaping) are decoded; what is replaced is
the run as it was written, its escapes included. A line is first searched for the secret's aligned blocks of 6
characters (a run of 12 holds one whole; ``needles``), and only a line that holds one, or an escape, is looked at
closer: one key costs a 2.4 KB record line some 30-50 us (6 us before runs were scrubbed), on what is written (a
record's line, a detail kept), never per read.

Body field names are matched whole (``api_key``, ``password``), never by substring: ``prompt_cache_key`` is an
affinity hint, not a secret. Header names are matched by what they say (``secret_header``): any header whose name
says auth, key, token, secret, password, credential, subscription, signature or cookie holds a secret
(``Ocp-Apim-Subscription-Key``, ``X-Auth-Token``, ``x-goog-api-key``).
"""

from __future__ import annotations

import base64
import re
from bisect import bisect_right
from typing import Any
from urllib.parse import quote, quote_plus

REDACTED = "***"
SECRET_NAMES = {
    "api_key", "apikey", "api-key", "x-api-key", "key", "secret", "client_secret", "password", "passwd", "token",
    "access_token", "refresh_token", "id_token", "auth", "authorization", "bearer", "private_key", "credentials",
}  # fmt: skip
_SECRET_HEADER = re.compile(r"auth|key|token|secret|passw|credential|subscription|signature|cookie", re.IGNORECASE)
MIN_SECRET = 8  # shorter values would scrub innocent text (and a one-character "key" is no secret worth hiding)
MIN_RUN = 12  # a run of this many consecutive characters of a secret is scrubbed wherever it appears, in any case
_BLOCK = MIN_RUN // 2  # every run of MIN_RUN characters of a secret holds one of its blocks of this many, aligned
_ESCAPE = re.compile(r"\\+(?:u([0-9a-fA-F]{4})|/)")  # a JSON escape a key's character may hide in (any depth)
_DANGLING = re.compile(rb"(?<!\\)((?:\\\\)*)\\\*\*\*")  # ``***`` after an odd number of backslashes
_ASCII_LOWER = {c: c + 32 for c in range(65, 91)}  # str.translate: lower-cased, each character one character
_ASCII_UPPER = {c: c - 32 for c in range(97, 123)}
_UPPER = bytes.maketrans(b"abcdefghijklmnopqrstuvwxyz", b"ABCDEFGHIJKLMNOPQRSTUVWXYZ")
_NUMBERS = b"0123456789.,"  # what a record's numbers are made of: left out where a secret's needles are looked for


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
        # A secret of several words is its long words (``Bearer KEY``: the key), or itself when it has none.
        words = {w for s in secrets if s for w in ([w for w in s.split() if len(w) >= MIN_SECRET] or [s])}
        originals = sorted({w for w in words if len(w) >= MIN_SECRET}, key=len, reverse=True)
        # Runs are matched in any case, escapes decoded: a form they find whole (the secret itself, JSON-escaped,
        # in either case) is not searched for again.
        self._runs = sorted({_lower(w) for w in originals if len(w) >= MIN_RUN})
        short, plain = zip(*map(needles, self._runs), strict=True) if self._runs else ((), ())
        self._short = sorted({n for ns in short for n in ns})
        self._plain = sorted({n for ns in plain for n in ns})
        forms: set[str] = set()
        for s in originals:
            forms |= {f for f in encoded_forms(s) if _lower(_decoded(f)[0]) not in self._runs}
        self.values = sorted(forms, key=len, reverse=True)
        self._bytes = [v.encode() for v in self.values]
        # A secret's start left where a text was cut: an excerpt's "...", a JSON string's end, the text's end.
        prefixes = sorted({s[:k] for s in originals for k in range(MIN_SECRET, len(s))}, key=len, reverse=True)
        pattern = "|".join(map(re.escape, prefixes))
        self._cut = re.compile(f'(?:{pattern})(?=\\.\\.\\.|"|\\\\|$)') if prefixes else None
        self._cut_bytes = re.compile(self._cut.pattern.encode()) if self._cut is not None else None
        self._heads = [(s[:MIN_SECRET], s[:MIN_SECRET].encode()) for s in originals]

    def __bool__(self) -> bool:
        return bool(self.values or self._runs)

    def line(self, data: bytes) -> bytes:
        for value in self._bytes:
            if value in data:
                data = data.replace(value, REDACTED.encode())
        if self._cut_bytes is not None and any(head in data for _, head in self._heads):
            data = self._cut_bytes.sub(REDACTED.encode(), data)
        if self._runs and (_has_escape(data) or self._may_hold(data)):
            data = self._partial(data.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")
        if b"\\***" in data:  # a secret that began where an escape's letter stood (``\\n`` then "key..."): the
            data = _DANGLING.sub(rb"\1***", data)  # backslash left would escape the ``*``: the line stays JSON
        return data

    def text(self, text: str) -> str:
        for value in self.values:
            if value in text:
                text = text.replace(value, REDACTED)
        if self._cut is not None and any(head in text for head, _ in self._heads):
            text = self._cut.sub(REDACTED, text)
        if self._runs and (_has_escape(text) or self._may_hold(text.encode("utf-8", "surrogatepass"))):
            text = self._partial(text)
        return text

    def _may_hold(self, data: bytes) -> bool:
        """Whether ``data`` holds one of the needles that every run of a secret holds (``needles``)."""
        if self._short:
            kept = data.translate(_UPPER, _NUMBERS)
            if any(n in kept for n in self._short):
                return True
        if self._plain:
            upper = data.upper()
            return any(n in upper for n in self._plain)
        return False

    def _partial(self, text: str) -> str:
        """``text`` with every run of MIN_RUN or more characters of a secret replaced (any case, JSON escapes
        decoded to match; the run replaced as written)."""
        view, spots = _decoded(text)
        view = _lower(view)
        spans = sorted(span for secret in self._runs for span in _runs_of(view, secret))
        merged: list[list[int]] = []
        for a, b in spans:
            if merged and a <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], b)
            else:
                merged.append([a, b])
        for a, b in reversed(merged):
            start, end = _whole_escapes(text, _original(spots, a, False), _original(spots, b - 1, True))
            text = text[:start] + REDACTED + text[end:]
        return text

    def value(self, obj: Any) -> Any:
        """``obj`` (JSON-like) with every secret value replaced inside its strings."""
        if not self:
            return obj
        if isinstance(obj, str):
            return self.text(obj)
        if isinstance(obj, dict):
            return {k: self.value(v) for k, v in obj.items()}
        if isinstance(obj, list):
            return [self.value(v) for v in obj]
        return obj


def _lower(text: str) -> str:
    """``text`` with its ASCII letters lower-cased, each character still one (what matching a secret in any case
    needs: the positions found are the text's)."""
    return text.lower() if text.isascii() else text.translate(_ASCII_LOWER)


def _has_escape(text: str | bytes) -> bool:
    """Whether ``text`` holds a JSON escape a character may hide in (``\\u``, ``\\/``)."""
    if isinstance(text, bytes):
        return b"\\" in text and (b"\\u" in text or b"\\/" in text)
    return "\\" in text and ("\\u" in text or "\\/" in text)


def needles(secret: str) -> tuple[list[bytes], list[bytes]]:
    """What a text is searched for before it is looked at closer for runs of ``secret``: every run of MIN_RUN
    characters of it holds one of the secret's aligned blocks of ``_BLOCK`` (as ``_runs_of`` finds them), and each
    block is looked for upper-cased with its digits, dots and commas left out (the numbers that fill most of a
    record's line: a third of the bytes to scan; upper-case, because CPython's substring search skips ahead past a
    character no needle's character shares the low six bits of its code with, and the letters p to y share them
    with the digits), or as it is where fewer than 4 characters would be left (upper-cased, in the whole text).
    Returns (needles of the text without its numbers, needles of the whole text); a text that holds none of them
    holds no run."""
    short: set[bytes] = set()
    plain: set[bytes] = set()
    upper = secret.upper() if secret.isascii() else secret.translate(_ASCII_UPPER)
    for at in range(0, len(upper) - _BLOCK + 1, _BLOCK):
        block = upper[at : at + _BLOCK].encode("utf-8", "surrogatepass")  # (as ``Scrubber.text`` encodes a text)
        kept = block.translate(None, _NUMBERS)
        (short if len(kept) >= 4 else plain).add(kept if len(kept) >= 4 else block)
    return sorted(short), sorted(plain)


Spot = tuple[int, int, int, int]  # a decoded escape: (start, end) in the decoded text, (start, end) as written


def _decoded(text: str) -> tuple[str, list[Spot]]:
    """``text`` with its JSON escapes of a character (``\\u0073``, ``\\/``, behind any number of backslashes)
    decoded, and where each one was."""
    if not _has_escape(text):
        return text, []
    parts: list[str] = []
    spots: list[Spot] = []
    last = size = 0
    for m in _ESCAPE.finditer(text):
        plain = text[last : m.start()]
        parts.append(plain)
        size += len(plain)
        parts.append(chr(int(m.group(1), 16)) if m.group(1) else "/")
        spots.append((size, size + 1, m.start(), m.end()))
        size += 1
        last = m.end()
    parts.append(text[last:])
    return "".join(parts), spots


def _original(spots: list[Spot], at: int, end: bool) -> int:
    """Where the decoded character ``at`` begins (or, ``end``, ends) in the text as written."""
    i = bisect_right(spots, (at, 1 << 62)) - 1  # the last escape that starts at or before it
    if i < 0:
        return at + end
    _, d_end, o_start, o_end = spots[i]
    if at < d_end:  # the escape itself
        return o_end if end else o_start
    return at + (o_end - d_end) + end


def _whole_escapes(text: str, start: int, end: int) -> tuple[int, int]:
    """``start``, ``end`` widened so that no escape is cut (a backslash left before ``***`` would escape it)."""
    if _escaping(text, start):
        start -= 1
    if end < len(text) and end > start and _escaping(text, end):
        end += 1
    return start, end


def _escaping(text: str, at: int) -> bool:
    """Whether the character at ``at`` is escaped by the backslashes before it (an odd number of them)."""
    n = 0
    while at - n > 0 and text[at - n - 1] == "\\":
        n += 1
    return n % 2 == 1


def _runs_of(view: str, secret: str) -> list[tuple[int, int]]:
    """Every maximal run of MIN_RUN or more characters of ``secret`` in ``view`` (both lower-cased): found by the
    secret's aligned blocks, each occurrence grown on both sides while it goes on matching the secret."""
    spans: list[tuple[int, int]] = []
    for at in range(0, len(secret) - _BLOCK + 1, _BLOCK):
        block = secret[at : at + _BLOCK]
        p = view.find(block)
        while p >= 0:
            a, j = p, at
            while a > 0 and j > 0 and view[a - 1] == secret[j - 1]:
                a, j = a - 1, j - 1
            b, k = p + _BLOCK, at + _BLOCK
            while b < len(view) and k < len(secret) and view[b] == secret[k]:
                b, k = b + 1, k + 1
            if b - a >= MIN_RUN:
                spans.append((a, b))
            p = view.find(block, p + 1)
    return spans


def redact_fields(obj: Any) -> Any:
    """``obj`` with the values of secret-named fields replaced, at any depth."""
    if isinstance(obj, dict):
        return {k: (REDACTED if str(k).lower() in SECRET_NAMES else redact_fields(v)) for k, v in obj.items()}
    if isinstance(obj, list):
        return [redact_fields(v) for v in obj]
    return obj
