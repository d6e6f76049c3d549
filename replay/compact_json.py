"""JSON bytes that are kept: ``orjson.dumps`` with the result in a bytes object of its own size.

orjson (3.13, measured here) writes into a buffer it does not shrink: about 4 KB for a small result, and for a long
string room for its worst-case escaping (a 1.1 MB message sat in a 16 MB allocation). So every result held for long
costs more than its size: 100,000 pre-serialised 33-byte messages took 412 MB where exact-size copies take 9 MB, and
the untouched tails of long ones add up to what the allocator hands out again (64 trajectories of 1M tokens: 30 to
140 MB more resident after the load, varying from run to run). Bytes a run keeps for its whole length (each message
serialised once at load, each flavour's fragments) go through ``dumps``; bytes written and dropped at once (records)
need not.
"""

from __future__ import annotations

from typing import Any

import orjson


def dumps(obj: Any) -> bytes:
    return bytes(memoryview(orjson.dumps(obj)))
