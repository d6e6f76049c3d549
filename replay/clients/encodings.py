"""A body the host compressed although the client asked for none, decoded once the stream has closed.

Every request says ``Accept-Encoding: identity``; a proxy may compress an SSE stream anyway. The body is kept as it
arrived (the per-read path is unchanged); here, after the stream closed, each read is decompressed in turn and its
bytes keep that read's time, so token times are those of the compressed bytes that carried them. gzip and deflate
(zlib or raw) are read with the standard library; anything else fails the call, named. The decompressed size is
bounded by ``--max-response-bytes`` as the compressed one is (a small body may expand a thousandfold).
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

from replay.errors import ReplayError

READABLE = ("gzip", "x-gzip", "deflate")


class EncodingError(ReplayError, ValueError):
    """The body cannot be decompressed (an unknown encoding, damaged bytes, too large once decompressed)."""


def decoded(reads: Sequence[bytes], times: Sequence[float], encoding: str, limit: int
            ) -> tuple[list[bytes], list[float]]:  # fmt: skip
    """The reads decompressed (each read's bytes with its time); EncodingError when they cannot be."""
    encoding = encoding.strip().lower()
    if encoding not in READABLE:
        raise EncodingError(f"the host compressed the stream as {encoding[:40]!r}, which replay does not read (it"
                            " asks for Accept-Encoding: identity)")  # fmt: skip
    first = True
    d = zlib.decompressobj(zlib.MAX_WBITS | 32)  # gzip or zlib, by their headers
    out_reads: list[bytes] = []
    out_times: list[float] = []
    total = 0
    for data, t in zip(reads, times, strict=True):
        parts: list[bytes] = []
        buf = data
        while buf and not d.eof:
            try:
                piece = d.decompress(buf, limit + 1 - total)
            except zlib.error as exc:
                if first and encoding == "deflate":  # raw deflate, as some servers send it
                    d, first = zlib.decompressobj(-zlib.MAX_WBITS), False
                    continue
                raise EncodingError(f"the {encoding} stream could not be decompressed ({exc})") from None
            first = False
            total += len(piece)
            if total > limit:
                raise EncodingError(f"the decompressed stream passed {limit:,} bytes (--max-response-bytes)")
            parts.append(piece)
            buf = d.unconsumed_tail
        out_reads.append(b"".join(parts))
        out_times.append(t)
    return out_reads, out_times
