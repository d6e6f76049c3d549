"""Sessions found by prefix extension, for request logs that do not say which session a request belongs to."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class PrefixSessions:
    """Sessions found by prefix extension, for logs that do not say which session a request belongs to.

    Each session expects its next request to start with a known prefix (its last request, and the answer
    where the log has one). A request continues the session whose expected prefix is the longest prefix of
    it; each expectation is met once. Prefixes are found by a rolling hash of ``item_key`` per item, and
    confirmed item by item.
    """

    def __init__(self, item_key: Callable[[Any], Any]) -> None:
        self._item_key = item_key
        self._open: dict[tuple[int, int], int] = {}  # (prefix length, rolling hash) -> session
        self._expected: dict[int, tuple[tuple[int, int], list[Any]]] = {}  # session -> its key and prefix

    def _keys(self, items: list[Any]) -> list[tuple[int, int]]:
        keys = []
        h = 0
        for i, item in enumerate(items):
            h = hash((h, self._item_key(item)))
            keys.append((i + 1, h))
        return keys

    def match(self, items: list[Any]) -> int | None:
        """The session this request continues (its expectation is used up), or None for a new one."""
        for key in reversed(self._keys(items)):
            sid = self._open.get(key)
            if sid is not None and self._expected[sid][1] == items[: key[0]]:
                del self._open[key]
                return sid
        return None

    def expect(self, session: int, items: list[Any]) -> None:
        """``session``'s next request should start with ``items`` (nothing is expected of an empty list)."""
        if items:
            key = self._keys(items)[-1]
            self._open[key] = session
            self._expected[session] = (key, items)
