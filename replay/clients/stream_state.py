"""What a stream said (``StreamState``) and how an API flavour reads its stream (``StreamReader``).

A flavour's ``StreamReader`` says what an ordinary event carries from its bytes (``scan``), decodes the others
(``decode``) and judges the end (``finish``); each event's figures go into the call's ``StreamState``: its token
times (``add``, ``add_reads``), usage, finish reason, errors, what the host says about itself, and the answer text
and tool calls where they are collected.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from replay.clients.usage import Usage, excerpt

NONE, REASONING, ANSWER = 0, 1, 2  # what an event carries


@dataclass(slots=True)
class StreamState:
    """What a stream said, as its events were classified."""

    first_token: float | None = None
    first_answer: float | None = None
    last_token: float | None = None
    events: int = 0  # token-bearing events
    chunks: list[float] = field(default_factory=list)  # flat [dt, n, ...]: token-bearing reads after t_sent
    usage_parts: list[Any] = field(default_factory=list)  # the usage objects as the host sent them, in order
    usage: Usage | None = None  # checked counts, made by the flavour at the end
    finish_reason: str | None = None
    ended: bool = False  # the flavour's end-of-stream marker was seen
    error: str | None = None  # the host said the call failed (an error event)
    malformed: str | None = None  # the first event that could not be understood
    served: dict[str, Any] = field(default_factory=dict)  # what the host says about itself (model, tier, ...)
    timings: Any = None  # server-side timings the host sent
    speculation: dict[str, int] | None = None  # accepted and drafted tokens, drafts, as the host reported them
    response_id: str | None = None
    text: list[str] | None = None  # answer text, when collected (live history, --check-answers)
    reasoning_text: list[str] | None = None
    # Tool calls as streamed, by the host's index: id, name and argument pieces. Always kept: their events are
    # decoded whatever the mode (no fast path counts them), so keeping them costs nothing more. Live history sends
    # them back; the answer checks judge them.
    calls: dict[Any, dict[str, Any]] | None = None
    notes: list[str] = field(default_factory=list)  # host values left out (implausible numbers), and why

    def add(self, t: float, t_sent: float, n: int, answer: bool) -> None:
        """Account ``n`` token-bearing events that arrived in the read at ``t``."""
        if self.ended:
            self.bad("tokens after the end of the stream")
        self.events += n
        if self.first_token is None:
            self.first_token = t
        if answer and self.first_answer is None:
            self.first_answer = t
        self.last_token = t
        dt = round((t - t_sent) * 1e6) / 1e6  # to the µs, exactly as ``add_reads`` rounds in bulk
        if self.chunks and self.chunks[-2] == dt:
            self.chunks[-1] += n
        else:
            self.chunks += (dt, n)

    def add_reads(self, times: Sequence[float], t_sent: float) -> None:
        """``add(t, t_sent, 1, True)`` for each of ``times`` (non-decreasing), in one go."""
        if not times:
            return
        if self.ended:
            self.bad("tokens after the end of the stream")
        self.events += len(times)
        if self.first_token is None:
            self.first_token = times[0]
        if self.first_answer is None:
            self.first_answer = times[0]
        self.last_token = times[-1]
        dts = np.rint((np.asarray(times) - t_sent) * 1e6) / 1e6  # (``round(x, 6)`` is 8x slower)
        starts = np.flatnonzero(np.diff(dts, prepend=np.nan) != 0)  # reads within one µs share a chunk
        counts = np.diff(starts, append=dts.size).tolist()
        values = dts[starts].tolist()
        ch = self.chunks
        if ch and ch[-2] == values[0]:
            ch[-1] += counts[0]
            values, counts = values[1:], counts[1:]
        flat: list[float] = [0.0] * (2 * len(values))
        flat[0::2] = values
        flat[1::2] = counts
        ch += flat

    def bad(self, problem: str, data: bytes | str = b"") -> None:
        """Note the first thing that could not be understood (the call then fails as ``malformed_stream``)."""
        if self.malformed is None:
            self.malformed = f"{problem}: {excerpt(data, 120)}" if data else problem

    def collect(self, answer: bool, text: Any) -> None:
        if isinstance(text, str):  # both lists are made together when the text is collected (live history)
            collected = self.text if answer else self.reasoning_text
            if collected is not None:
                collected.append(text)

    def call_part(self, index: Any, call_id: Any = None, name: Any = None, arguments: Any = None) -> None:
        """A piece of a streamed tool call: its id and name when they come, its arguments in pieces."""
        if self.calls is None:
            self.calls = {}
        key = index if isinstance(index, int | str) else repr(index)[:40]  # whatever the host sent as its index
        call = self.calls.setdefault(key, {"id": None, "name": "", "pieces": []})
        if isinstance(call_id, str) and call_id:
            call["id"] = call_id[:200]
        if isinstance(name, str) and name and not call["name"]:
            call["name"] = name[:200]
        if isinstance(arguments, str) and arguments:
            call["pieces"].append(arguments)

    def call_streamed(self, index: Any) -> bool:
        """Whether argument pieces of this call came before (a host that also sends them whole at the end)."""
        key = index if isinstance(index, int | str) else repr(index)[:40]
        return bool(self.calls and key in self.calls and self.calls[key]["pieces"])

    def tool_calls(self) -> list[dict[str, Any]]:
        """The collected tool calls, OpenAI-shaped, in the stream's order."""
        return [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": "".join(c["pieces"])}}
            for c in (self.calls or {}).values()
        ]


class StreamReader:
    """How one API flavour reads its stream. Subclasses override what their format needs."""

    def plain_tokens(self, region: bytes) -> int | None:
        """Answer tokens in a region of complete events if every event is a plain answer delta, else None."""
        return None

    EMPTY_DELTA: bytes | None = None  # the bytes of an empty plain delta, as ``plain_tokens`` discounts them

    def scan(self, name: bytes | None, data: bytes) -> int | None:
        """What an ordinary event carries, from its bytes alone (NONE / REASONING / ANSWER); None: decode it."""
        return None

    def decode(self, st: StreamState, name: bytes | None, data: bytes) -> int:
        """Decode one event, keep the figures it carries, and say what it carried."""
        raise NotImplementedError

    def finish(self, st: StreamState, tail: bytes) -> None:
        """After the last event: build ``st.usage`` from ``st.usage_parts`` and judge whether the stream ended."""
        raise NotImplementedError
