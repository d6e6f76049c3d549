"""The terminal report's lines on what the host said about itself: served by, server vs client timings, routes
and speed modes, cost, rate limits, connections and the provider's limits (figures from metrics.summarize)."""

from __future__ import annotations

from typing import Any


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v * 1000:,.1f} ms"


def _tps(v: float | None) -> str:
    return "-" if v is None else f"{v:,.0f}"


def _signed(v: float | None) -> str:
    return "-" if v is None else f"{v:+,.0f}"


def _usd(v: float | None) -> str:
    return "-" if v is None else (f"${v:,.4f}" if v < 1 else f"${v:,.2f}")


def _shares(d: dict[str, float]) -> str:
    return ", ".join(f"{k} {100 * v:.1f}%" for k, v in d.items())


def provider_lines(s: dict[str, Any]) -> list[str]:
    """A few lines, only for what the host reported (nothing for a plain host)."""
    lines = (
        _server(s.get("server"), (s.get("window") or {}).get("requests"))
        + _routes(s)
        + speculation_lines(s.get("speculation"))
        + _cost(s.get("cost"))
        + _signals(s)
    )
    return ["", "What the host says", *lines] if lines else []


def _server(sv: dict[str, Any] | None, measured: int | None) -> list[str]:
    """The host's own timings, over the calls that carried them (said of how many the window measured)."""
    if not sv:
        return []
    of = f" of {measured:,} calls: those that carried timings" if measured and measured != sv["requests"] else ""
    t, d = sv["ttft_s"], sv["decode_tps"]
    gap, gap_tps = sv["client_minus_server_ttft_s"], sv["client_minus_server_decode_tps"]
    return [
        f"  server TTFT p50 {_ms(t['p50'])}, p95 {_ms(t['p95'])} (queue p50 {_ms(sv['queue_s']['p50'])}) · server"
        f" decode p50 {_tps(d['p50'])} tok/s  (n={sv['requests']}{of})",
        f"  client − server: TTFT p50 {_ms(gap['p50'])}, p95 {_ms(gap['p95'])} · decode p50"
        f" {_signed(gap_tps['p50'])} tok/s (network, queues outside the engine, client)",
    ]


def _routes(s: dict[str, Any]) -> list[str]:
    out = []
    models = (s.get("served") or {}).get("models") or {}
    if len(models) > 1:
        out.append(f"  served models: {_shares(models)}")
    if s.get("routes") and (len(s["routes"]) > 1 or s.get("service_tiers")):
        out.append(f"  routes: {_shares(s['routes'])}")
    if s.get("service_tiers"):
        out.append(f"  service tier answered: {_shares(s['service_tiers'])}")
    modes = s.get("speed_modes") or []
    if len(modes) == 2:
        cells = " · ".join(
            f"{100 * m['share']:.1f}% at {_tps(m['user_decode_tps_p50'])} tok/s"
            + (f" ({m['route']})" if m.get("route") else "")
            for m in modes
        )
        out.append(f"  two speed modes (per-user decode): {cells}")
    if fb := s.get("fallback"):
        who = ", ".join(f"{k} {v}" for k, v in fb["served"].items())
        out.append(f"  fallback: {100 * fb['share']:.1f}% of calls ({fb['requests']:,})"
                   + (f" served by {who}" if who else "") + f"; found by {', '.join(fb['by'])}")  # fmt: skip
    return out + _speed_causes(s)


def _speed_causes(s: dict[str, Any]) -> list[str]:
    """Two speed clusters no served identity explains, with the cause their rows show (load, prompt length)."""
    load = s.get("speed_by_load") or {}
    if not load.get("split"):
        return []
    by = load.get("by") or []
    names = {"load": "load", "prompt_length": "prompt length"}
    if not by:
        return [
            "  per-user decode speed falls in two clusters that no model, route or tier explains; nor do load",
            "    or prompt length: its medians by calls in flight and by prompt tokens differ less",
        ]
    out = [
        f"  per-user decode speed varies with {' and '.join(names[b] for b in by)} (no model, route or tier behind it);"
    ]
    if "load" in by:
        cells = " · ".join(f"{_tps(r['user_decode_tps_p50'])} at {r['inflight']}" for r in load["rows"])
        out.append(f"    p50 tok/s by calls in flight: {cells}")
    if "prompt_length" in by:
        rows = [r for r in (s.get("breakdown") or {}).get("by_context") or () if r["decode_tps"].get("n")]
        cells = " · ".join(f"{_tps(r['decode_tps']['p50'])} at {r['bucket']}" for r in rows)
        out.append(f"    p50 tok/s by prompt tokens: {cells}")
    return out


def speculation_lines(sp: dict[str, Any] | None) -> list[str]:
    """Speculative decoding's acceptance, said of what it covers (the calls that reported it, or the host's counters
    over the scraped windows), in lines under 100 columns."""
    if not sp:
        return []
    length = sp.get("acceptance_length_mean")
    what = f": mean acceptance length {length:.2f} tokens per verify step" if length is not None else ""
    cells = []
    if sp.get("accepted_tokens") is not None:
        drafted = sp.get("drafted_tokens")
        cells.append(
            f"{sp['accepted_tokens']:,} tokens accepted" + (f" of {drafted:,} drafted" if drafted is not None else "")
        )
    if sp.get("drafts") is not None:
        cells.append(f"{sp['drafts']:,} drafts")
    cells.append(
        f"from {sp['calls']:,} calls" if sp.get("calls") else f"the host's counters ({sp.get('windows') or 0} windows)"
    )
    return [f"  speculative decoding{what}", f"    {' · '.join(cells)}"]


def _cost(c: dict[str, Any] | None) -> list[str]:
    if not c or (c.get("card") is None and c.get("total_usd") is None and c.get("host_reported_usd") is None):
        return []
    line = f"  cost: {_usd(c['total_usd'])} ({c['card'] or 'rate card'})"
    if c.get("total_usd") is not None:
        line += f" · {_usd(c['per_task_usd'])} per task · {_usd(c['per_mtok_usd'])} per million tokens"
    if c.get("host_reported_usd") is not None:
        line += f" · host-reported {_usd(c['host_reported_usd'])} ({c['host_reported_requests']} calls)"
    return [line + (f" · {c['unpriced']} calls unpriced (no usage)" if c.get("unpriced") else "")]


def _signals(s: dict[str, Any]) -> list[str]:
    out = []
    limits = s.get("rate_limits") or {}
    if limits:
        cells = [f"{k} {b['remaining_min']:,} of {b['limit']:,}" for k, b in limits.items()
                 if b["remaining_min"] is not None and b["limit"] is not None]  # fmt: skip
        if cells:
            out.append(f"  rate limits, lowest remaining: {', '.join(cells)}")
    conn = s.get("connections") or {}
    if conn.get("new"):
        ct = conn["connect_s"]
        out.append(f"  new connections: {conn['new']} of {conn['new'] + conn['reused']} calls, connect p50"
                   f" {_ms(ct['p50'])}, p95 {_ms(ct['p95'])} (before the bytes left: not in TTFT)")  # fmt: skip
    if conn.get("reconnects"):
        out.append(f"  reconnects: {conn['reconnects']} WebSockets the host closed (its connection limit, a drop) were"
                   " replaced")  # fmt: skip
    pl = s.get("provider_limits") or {}
    named = [f"{k} {v}" for k, v in pl.items() if isinstance(v, int)]
    if named:
        out.append(f"  provider limits hit: {', '.join(named)}")
    g = pl.get("groq_performance_uncached_8192")
    if g and g["above"]:
        out.append(f"  {g['above']} of {g['of']} calls exceed Groq's Performance tier (uncached context >= 8,192)")
    return out
