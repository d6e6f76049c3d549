"""What the host said about itself, gathered one request at a time: the raw material of the provider figures.

The provider figures (docs/providers.md: server timings, routes, service tiers, speed modes, cost, rate-limit state,
connections, tier checks) used to be made from the list of a run's records. A ``HostTally`` keeps only counts, sums,
HdrHistograms and a log-binned table of decode speeds, so it rides in the ``Accumulator`` of a run, of a soak's
window, or of a span: it merges exactly and travels as JSON like the rest. Cost is priced as each request comes,
from the rate card of the run's header (``card``), so nothing of the requests needs to be kept for it.

Which requests count where follows ``metrics.summarize``: routes, tiers, cost, rate limits and tier checks over
every request (routes and tiers over the successful ones); server timings, speed modes and connections over the
measured calls (successful, sent in the steady window).
"""

from __future__ import annotations

import math
from typing import Any

from replay.histogram import Histogram, SignedHistogram
from replay.metrics.host import speculation
from replay.metrics.host.cost import PICO, request_cost
from replay.metrics.host.host_signals import bucket_field, parse_int
from replay.metrics.host.routes import (
    MAX_NAME,
    MAX_NAMES,
    SPEED_BINS_PER_E,
    count_name,
    fallback_fields,
    host_name,
    identity_of,
    load_bucket,
    route_of,
    seen_decode_speed,
)
from replay.metrics.host.server_figures import server_times
from replay.records.host_numbers import MAX_USD, number
from replay.records.run_file import RequestRecord

US = 1_000_000
TPS_SCALE = 1000
GROQ_PERFORMANCE_UNCACHED = 8192  # Groq's Performance tier takes requests whose uncached context is below this
SERVER = ("ttft", "queue", "prefill", "decode")


def _hist() -> Histogram:
    return Histogram()


def _enc(h: Histogram) -> str | None:
    return h.encode()


def _dec(data: str | None) -> Histogram:
    return Histogram.decode(data)


def _add_counts(mine: dict[str, int], theirs: dict[str, int]) -> None:
    for k, n in theirs.items():
        count_name(mine, k, n)


class HostTally:
    """Counts, sums and histograms of what the host said (see the module's docstring)."""

    def __init__(self, card: dict[str, Any] | None = None) -> None:
        self.card = card
        self.routes: dict[str, int] = {}  # successful requests per served route
        self.tiers: dict[str, int] = {}  # successful requests per answered service tier
        self.idents: dict[str, int] = {}  # successful requests per served identity (model, route, tier)
        self.fallbacks: dict[str, int] = {}  # successful requests the host said fell back, per identity
        self.fallback_by: dict[str, int] = {}  # the same, per field that said so
        self.limits: dict[str, list[Any]] = {}  # bucket -> [limit, lowest remaining, last reset, requests]
        self.cost = [0, 0, 0, 0]  # pico-USD, tokens priced, requests priced, requests not priced
        self.task_usd: dict[int, int] = {}  # pico-USD: whole numbers, so sums in any order (windows) agree exactly
        self.reported = [0, 0]  # host-reported pico-USD, requests that reported one
        self.sized = [0, 0]  # requests with a reported prompt, those with ≥ 8192 uncached tokens
        self.spec = list(speculation.EMPTY)  # successful calls' speculative-decoding counts (speculation.add)
        # per measured call:
        self.server = {name: _hist() for name in SERVER}
        self.gap_ttft, self.gap_tps = SignedHistogram(), SignedHistogram()
        self.speeds: dict[int, dict[str, int]] = {}  # log-speed bin -> {served identity: calls}
        self.load: dict[int, Histogram] = {}  # calls in flight (power-of-two bucket) -> decode speeds (milli-tok/s)
        self.connect = _hist()  # µs to open a new connection
        self.conn = [0, 0, 0]  # new, reused, reconnects (a WebSocket the host had closed, replaced)

    # --- adding ------------------------------------------------------------------------------------------------
    def add(self, r: RequestRecord, measured: bool) -> None:
        route = route_of(r)
        ident = None  # the call's served identity, worked out once for the counts below
        if r.error is None:
            if route:
                count_name(self.routes, route)
            if tier := host_name((r.served or {}).get("service_tier")):
                count_name(self.tiers, tier)
            ident = identity_of(r, route or "")
            self._served(r, ident)
        if r.headers:
            self._limits(r.headers)
        self._cost(r)
        if r.prompt_tokens is not None:
            self.sized[0] += 1
            self.sized[1] += r.prompt_tokens - (r.cached_tokens or 0) >= GROQ_PERFORMANCE_UNCACHED
        if measured:
            self._measured(r, ident)

    def _served(self, r: RequestRecord, ident: str) -> None:
        if r.speculation is not None:
            speculation.add(self.spec, r.speculation)
        count_name(self.idents, ident)
        if said := fallback_fields(r):
            count_name(self.fallbacks, ident)
            for name in said:
                count_name(self.fallback_by, name)

    def _limits(self, headers: dict[str, str]) -> None:
        for name, value in headers.items():
            bf = bucket_field(name) if "ratelimit-" in name else None
            if bf is None or (bf[0] not in self.limits and len(self.limits) >= MAX_NAMES):
                continue  # (a host that invents a bucket a call: the first MAX_NAMES are kept)
            b = self.limits.setdefault(bf[0], [None, None, None, 0])
            if bf[1] == "limit":
                b[0] = parse_int(value)
                b[3] += 1
            elif bf[1] == "remaining" and (n := parse_int(value)) is not None:
                b[1] = n if b[1] is None else min(b[1], n)
            elif bf[1] == "reset":
                b[2] = value[:MAX_NAME]

    def _cost(self, r: RequestRecord) -> None:
        host_usd = number((r.served or {}).get("cost"), 0.0, MAX_USD)  # (a file may hold any value there)
        if host_usd is not None:
            self.reported[0] += round(host_usd * PICO)
            self.reported[1] += 1
        if self.card is None:
            return
        usd = request_cost(self.card, r)
        if usd is None:
            self.cost[3] += 1
            return
        pico = round(usd * PICO)
        self.cost[0] += pico
        self.cost[1] += (r.prompt_tokens or 0) + (r.output_tokens or 0)
        self.cost[2] += 1
        self.task_usd[r.task] = self.task_usd.get(r.task, 0) + pico

    def _measured(self, r: RequestRecord, ident: str | None) -> None:
        if r.reconnect is not None:
            self.conn[2] += 1
        if r.connect_s is not None:
            self.conn[0] += 1
            self.connect.record_clipped(r.connect_s * US)
        else:
            self.conn[1] += 1
        speed = seen_decode_speed(r)
        if speed is not None:
            ident = identity_of(r) if ident is None else ident
            count_name(self.speeds.setdefault(round(math.log(speed) * SPEED_BINS_PER_E), {}), ident)
            if r.inflight is not None:
                self.load.setdefault(load_bucket(r.inflight), _hist()).record_clipped(speed * TPS_SCALE)
        s = server_times(r.server_timings)
        if s is not None:
            self._server(r, s, speed)

    def _server(self, r: RequestRecord, s: dict[str, float | None], speed: float | None) -> None:
        h = self.server
        if s["queue"] is not None:
            h["queue"].record_clipped(s["queue"] * US)
        if s["prefill"] is not None:
            h["prefill"].record_clipped(s["prefill"] * US)
        if s["ttft"] is not None:
            h["ttft"].record_clipped(s["ttft"] * US)
            if r.t_first_token is not None:
                self.gap_ttft.record(r.t_first_token - r.t_sent - s["ttft"], US)
        n = r.output_tokens
        if s["decode"] and n is not None and n >= 2:
            tps = (n - 1) / s["decode"]
            h["decode"].record_clipped(tps * TPS_SCALE)
            if speed is not None:
                self.gap_tps.record(speed - tps, TPS_SCALE)

    # --- combining -----------------------------------------------------------------------------------------------
    def merge(self, other: HostTally, counts: bool = True, calls: bool = True) -> None:
        """Add ``other`` in: its counts over all requests, and its per-call figures (either may be left out)."""
        if counts:
            self._merge_counts(other)
        if calls:
            for name in SERVER:
                self.server[name].add(other.server[name])
            self.gap_ttft.merge(other.gap_ttft)
            self.gap_tps.merge(other.gap_tps)
            for b, routes in other.speeds.items():
                _add_counts(self.speeds.setdefault(b, {}), routes)
            for k, h in other.load.items():
                self.load.setdefault(k, _hist()).add(h)
            self.connect.add(other.connect)
            self.conn = [a + b for a, b in zip(self.conn, other.conn, strict=True)]

    def _merge_counts(self, other: HostTally) -> None:
        _add_counts(self.routes, other.routes)
        _add_counts(self.tiers, other.tiers)
        _add_counts(self.idents, other.idents)
        _add_counts(self.fallbacks, other.fallbacks)
        _add_counts(self.fallback_by, other.fallback_by)
        for bucket, (limit, low, reset, n) in other.limits.items():  # ``other`` is the later part of the run
            if bucket not in self.limits and len(self.limits) >= MAX_NAMES:
                continue
            b = self.limits.setdefault(bucket, [None, None, None, 0])
            b[0] = limit if limit is not None else b[0]
            b[1] = low if b[1] is None else b[1] if low is None else min(b[1], low)
            b[2] = reset if reset is not None else b[2]
            b[3] += n
        self.cost = [a + b for a, b in zip(self.cost, other.cost, strict=True)]
        for task, usd in other.task_usd.items():
            self.task_usd[task] = self.task_usd.get(task, 0) + usd
        self.reported = [a + b for a, b in zip(self.reported, other.reported, strict=True)]
        self.sized = [a + b for a, b in zip(self.sized, other.sized, strict=True)]
        self.spec = [a + b for a, b in zip(self.spec, other.spec, strict=True)]
        self.card = self.card if self.card is not None else other.card

    def encode(self) -> dict[str, Any]:
        return {
            "routes": self.routes,
            "tiers": self.tiers,
            "idents": self.idents,
            "fallbacks": self.fallbacks,
            "fallback_by": self.fallback_by,
            "limits": self.limits,
            "cost": self.cost,
            "task_usd": [[t, usd] for t, usd in self.task_usd.items()],
            "reported": self.reported,
            "sized": self.sized,
            "spec": self.spec,
            "server": {name: _enc(h) for name, h in self.server.items()},
            "gap_ttft": self.gap_ttft.encode(),
            "gap_tps": self.gap_tps.encode(),
            "speeds": [[b, routes] for b, routes in self.speeds.items()],
            "load": [[k, _enc(h)] for k, h in self.load.items()],
            "connect": _enc(self.connect),
            "conn": self.conn,
        }

    @classmethod
    def decode(cls, data: dict[str, Any] | None) -> HostTally:
        t = cls()
        if not data:  # a window record written before host tallies existed
            return t
        t.routes, t.tiers = dict(data["routes"]), dict(data["tiers"])
        # written before served identities (a route alone keys a speed bin, and nothing was counted per identity)
        t.idents = dict(data.get("idents") or {})
        t.fallbacks, t.fallback_by = dict(data.get("fallbacks") or {}), dict(data.get("fallback_by") or {})
        t.limits = {k: list(v) for k, v in data["limits"].items()}
        t.cost, t.reported, t.sized = list(data["cost"]), list(data["reported"]), list(data["sized"])
        t.task_usd = {int(k): int(v) for k, v in data["task_usd"]}
        t.spec = list(data.get("spec") or speculation.EMPTY)  # (a window written before speculation was tallied)
        t.server = {name: _dec(data["server"].get(name)) for name in SERVER}
        t.gap_ttft, t.gap_tps = SignedHistogram.decode(data["gap_ttft"]), SignedHistogram.decode(data["gap_tps"])
        t.speeds = {int(b): dict(routes) for b, routes in data["speeds"]}
        t.load = {int(k): _dec(h) for k, h in data.get("load") or ()}
        t.connect, t.conn = _dec(data["connect"]), [*data["conn"], 0, 0, 0][:3]  # (windows written before reconnects)
        return t


def tally_of(records: list[RequestRecord], card: dict[str, Any] | None = None, measured: bool = True) -> HostTally:
    """The tally of a list of records, all of them measured unless told otherwise (for tests and tools)."""
    t = HostTally(card)
    for r in records:
        t.add(r, measured)
    return t
