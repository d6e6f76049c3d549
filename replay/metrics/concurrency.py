"""Delivered concurrency: the lanes a run asked for beside what its lanes were doing, second by second.

A lane (one of the sessions run at once: ``--concurrency``, or an open loop's ``max_live``) is, at any moment:

- **in a call** from a root agent's call's ``t_call`` (the agent asked) to its ``t_done`` (every attempt; a subagent's
  calls overlap its parent's pause and are not counted again); of that, **waiting on the client** until ``t_sent``
  (the client's own queue and connecting: nothing had been sent yet);
- **in a tool pause** for the rest of a task of its ``[t_start, t_end)`` (the recorded tool pauses, waiting for
  subagents, backoff and ``--max-rpm`` waits);
- **idle** outside its tasks (waiting to start, or with nothing to do).

A lane is **active** while it is in a call or in a tool pause: doing the agent's work. A client too slow to send
shows as waiting on the client (and in ``client.send_wait_s``, ``client.saturated``, ``client.held_up``), a client
that cannot keep its lanes going (a ramp behind the window, sessions that never start) as idle lanes.

The times are kept as whole microseconds per second of the run's clock (``floor(t)``), so tallies of parts of a run
(a soak's windows, the workers of a sharded run) add exactly, and the figures cover the whole seconds inside the
steady window.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from replay.records.run_file import RequestRecord, TaskRecord

US = 1_000_000
CALL, WAIT, TASK, BETWEEN = 0, 1, 2, 3  # per second, lane-µs: in a call (of it waiting on the client), in a task,
# between two tasks of the lane
DELIVERED_SHARE = 0.95  # a run whose lanes (or arrivals) delivered less than this share of what it asked did not pass


class LaneTally:
    """Lane-microseconds in a call, waiting on the client, inside a task and between two tasks of a lane, per second
    of the clock; and the lanes that made calls. Fed one record at a time (a lane's tasks in order); tallies of
    later records merge in (a lane's gap between two parts filled) and travel as JSON, exactly."""

    __slots__ = ("ends", "lanes", "seconds", "starts")

    def __init__(self) -> None:
        self.seconds: dict[int, list[int]] = {}  # floor(t) -> [in call, waiting on the client, in a task, between]
        self.lanes: set[int] = set()  # lanes that made a call
        self.starts: dict[int, float] = {}  # lane -> the start of its first task here
        self.ends: dict[int, float] = {}  # lane -> the end of its last task here

    def add(self, r: RequestRecord) -> None:
        self.lanes.add(r.session)
        if r.parent is not None or r.t_done is None:
            return
        asked = r.t_sent
        if r.t_call is not None and r.t_call < r.t_sent:
            asked = r.t_call
            self._spread(r.t_call, r.t_sent, WAIT)
        self._spread(asked, r.t_done, CALL)

    def add_task(self, t: TaskRecord) -> None:
        self._between(t.session, t.t_start)
        self.starts.setdefault(t.session, t.t_start)
        self.ends[t.session] = t.t_end
        self._spread(t.t_start, t.t_end, TASK)

    def _between(self, lane: int, start: float) -> None:
        last = self.ends.get(lane)
        if last is not None and start > last:
            self._spread(last, start, BETWEEN)

    def _spread(self, a: float, b: float, kind: int) -> None:
        lo, hi = round(a * US), round(b * US)
        if lo >= hi:
            return
        seconds = self.seconds
        k = lo // US
        if hi <= (k + 1) * US:  # within one second (most calls)
            row = seconds.get(k)
            if row is None:
                row = seconds[k] = [0, 0, 0, 0]
            row[kind] += hi - lo
            return
        while lo < hi:
            edge = min(hi, (k + 1) * US)
            row = seconds.get(k)
            if row is None:
                row = seconds[k] = [0, 0, 0, 0]
            row[kind] += edge - lo
            lo, k = edge, k + 1

    def merge(self, other: LaneTally) -> None:
        """``other``'s records in, each of its lanes' records later than this tally's (a worker's next part, the
        next window)."""
        for lane, start in other.starts.items():
            self._between(lane, start)
            self.starts.setdefault(lane, start)
        self.ends.update(other.ends)
        for k, values in other.seconds.items():
            row = self.seconds.setdefault(k, [0, 0, 0, 0])
            for i, v in enumerate(values):
                row[i] += v
        self.lanes |= other.lanes

    def encode(self) -> dict[str, Any]:
        return {
            "seconds": [[k, *v] for k, v in self.seconds.items()],
            "lanes": sorted(self.lanes),
            "starts": list(self.starts.items()),
            "ends": list(self.ends.items()),
        }

    @classmethod
    def decode(cls, data: dict[str, Any] | None) -> LaneTally:
        tally = cls()
        if data:
            tally.seconds = {int(row[0]): [int(v) for v in row[1:5]] for row in data["seconds"]}
            tally.lanes = {int(lane) for lane in data["lanes"]}
            tally.starts = {int(lane): float(t) for lane, t in data["starts"]}
            tally.ends = {int(lane): float(t) for lane, t in data["ends"]}
        return tally


@dataclass(slots=True)
class ConcurrencyFigures:
    """Asked and delivered side by side (docs/metrics.md, "Delivered concurrency"); lane counts are means over the
    whole seconds of the steady window (``seconds``), ``*_min`` the lowest second's mean."""

    asked: int | None  # --concurrency, or the open loop's max_live
    lanes: int | None  # the lanes the run had (never more than the tasks it may start)
    made_calls: int  # lanes that made at least one call, over the run
    seconds: int  # whole seconds of the steady window the lane figures cover
    in_call_mean: float | None
    in_call_min: float | None
    in_tool_mean: float | None
    between_tasks_mean: float | None  # a lane between two of its tasks: active in a closed loop, idle in an open one
    client_wait_mean: float | None
    idle_mean: float | None
    active_mean: float | None
    active_min: float | None
    active_share: float | None  # active_mean / lanes
    arrivals_asked: int | None  # open loop: sessions that arrived by the stop
    arrivals_started: int | None  # open loop: of them, those that started
    judged: bool  # whether the verdict judges the delivery (a steady window of a timed closed loop; an open loop)
    delivered: bool | None
    shortfall: str | None  # why the run delivered less than it asked (the verdict's reason), else None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def concurrency_figures(
    tally: LaneTally, window: tuple[tuple[float, float], ...], steady: bool, header: dict[str, Any],
    footer: dict[str, Any] | None,
) -> ConcurrencyFigures:  # fmt: skip
    """The figures of ``tally`` over the whole seconds inside ``window`` (its parts: a resumed run's segments);
    ``steady``: the window is a steady one (not the whole run), so a closed loop's delivery is judged."""
    ended, footer = bool(footer), footer or {}
    open_loop = header.get("open_loop") or {}
    asked = open_loop.get("max_live") if open_loop else (header.get("load") or {}).get("concurrency")
    lanes = footer.get("sessions") or asked
    rows = [tally.seconds.get(k, [0, 0, 0, 0]) for a, b in window for k in range(math.ceil(a), math.floor(b))]
    # per second: in a call, in a call or a task, waiting on the client, between tasks; and active (a closed loop's
    # lane between two tasks is taking its next one; an open loop's waits for an arrival: idle)
    closed = 0 if open_loop else 1
    per_second = [(call / US, max(task, call) / US, wait / US, gap / US, (max(task, call) + closed * gap) / US)
                  for call, wait, task, gap in rows]  # fmt: skip
    n = len(per_second)

    def mean(i: int) -> float | None:
        return sum(p[i] for p in per_second) / n if n else None

    # a task's record comes at its end: until the footer, a running task's pauses would read as idle
    active = mean(4) if ended else None
    arrivals = (footer.get("open_loop") or {}) if open_loop else {}
    arrived = arrivals.get("arrived")
    started = arrived - (arrivals.get("never_started") or 0) if arrived is not None else None
    figures = ConcurrencyFigures(
        asked=asked,
        lanes=lanes,
        made_calls=len(tally.lanes),
        seconds=n,
        in_call_mean=mean(0),
        in_call_min=min((p[0] for p in per_second), default=None),
        in_tool_mean=None if active is None else (mean(1) or 0.0) - (mean(0) or 0.0),
        between_tasks_mean=None if active is None else mean(3),
        client_wait_mean=mean(2),
        idle_mean=None if active is None or not lanes else lanes - active,
        active_mean=active,
        active_min=None if active is None else min((p[4] for p in per_second), default=None),
        active_share=active / lanes if active is not None and lanes else None,
        arrivals_asked=arrived,
        arrivals_started=started,
        judged=False,
        delivered=None,
        shortfall=None,
    )
    # a resumed run is not judged: a segment that was killed left its running tasks unrecorded (their pauses idle)
    _judge(figures, steady and not open_loop and len(window) == 1)
    return figures


def _judge(f: ConcurrencyFigures, timed_closed_loop: bool) -> None:
    """Whether the run delivered what it asked: its lanes active in the steady window (a closed loop), or its
    arrivals started (an open loop), each at least DELIVERED_SHARE of what was asked."""
    if f.arrivals_asked:
        f.judged = True
        f.delivered = (f.arrivals_started or 0) >= DELIVERED_SHARE * f.arrivals_asked
        if not f.delivered:
            f.shortfall = (
                f"the client delivered less than the load asked: {f.arrivals_started} of "
                f"{f.arrivals_asked} arrivals started by the stop (under {DELIVERED_SHARE:.0%})"
            )
    elif timed_closed_loop and f.active_share is not None:
        f.judged = True
        f.delivered = f.active_share >= DELIVERED_SHARE
        if not f.delivered:
            f.shortfall = (
                f"the client delivered less than the load asked: {f.active_mean:.1f} of its {f.lanes} "
                f"lanes active on average in the steady window ({f.active_share:.1%}, under "
                f"{DELIVERED_SHARE:.0%}; {f.made_calls} of {f.asked} sessions asked made calls)"
            )
