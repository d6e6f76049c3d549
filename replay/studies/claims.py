"""``replay claims verify CLAIMS.toml``: published performance claims checked against a host.

A claims file (docs/claims-example.toml) has a ``[verify]`` table of defaults and one ``[[claim]]`` table per
claim: a metric, a claimed value and its unit, how it is checked (at least, at most, within) at what tolerance,
and its conditions (concurrency, percentile, GPUs, hardware, model, workload, output length). replay runs each
concurrency the claims need once (claims at the same level share its run; ``peak`` claims take the best of the
``peak_levels``), converts its figures with the definitions of docs/metrics.md (replay.studies.claim_units), and
gives each claim a verdict with the conditions it could not match. A ``what-if`` claim is arithmetic about a
faster model, checked with the formula of the summary's projected task time; it needs no run.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from replay.errors import ReplayError
from replay.studies.claim_units import Unit, UnitError, parse_unit, parse_value

CLAIMS_FORMAT = "replay.claims/1"
# metric -> (summary key, the unit kinds and denominators it can be expressed in, its percentiles)
METRICS: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    "total_tokens": ("throughput.total_tps", ("host", "gpu"), ()),
    "output_tokens": ("throughput.output_tps", ("host", "gpu"), ()),
    "output_speed": ("user_decode_tps", ("user", "request"), ("p25", "p50", "p75")),
    "ttft": ("ttft_s", ("latency",), ("p50", "p90", "p95", "p99")),
    "ttfat": ("ttfat_s", ("latency",), ("p50", "p90", "p95", "p99")),
    "e2e": ("e2e_s", ("latency",), ("p50", "p90", "p95", "p99")),
}
DEFINITIONS = {
    "total_tokens": "throughput.total_tps: (cached input + new input + output tokens attributed to the steady window)"
    " / window_s; per minute x 60; per GPU / the host's GPU count",
    "output_tokens": "throughput.output_tps: output tokens streamed in the steady window / window_s; per GPU / the"
    " host's GPU count",
    "output_speed": "user_decode_tps.{p}: per call (output_tokens - 1) / (t_last_token - t_first_token), the speed"
    " after the first token; per user = per request (one call in flight per agent in the closed loop)",
    "ttft": "ttft_s.{p}: t_first_token - t_sent of each call sent in the steady window",
    "ttfat": "ttfat_s.{p}: t_first_answer - t_sent (first non-reasoning token) of each call in the steady window",
    "e2e": "e2e_s.{p}: t_done - t_sent of each call sent in the steady window",
    "what-if": "tasks.projected_wall_s: wall - model + model / k, the model part k times faster, the rest unchanged",
}
CHECKS = ("at_least", "at_most", "within")
CONDITIONS = ("concurrency", "percentile", "gpus", "hardware", "model", "workload", "fingerprint", "output_tokens")


class ClaimsError(ReplayError, ValueError):
    """A claims file that cannot be read; the message names the file, the claim and the field."""


@dataclass(slots=True)
class Claim:
    name: str
    kind: str  # measure | what-if
    source: str = ""
    definition: str = ""  # the file's words for how the figure is defined
    metric: str = ""
    value: float = 0.0
    unit: Unit = field(default_factory=lambda: Unit("share", "share"))
    check: str = "within"
    tolerance: float = 0.1
    concurrency: int | str | None = None  # an int, or "peak"
    percentile: str = "p50"
    conditions: dict[str, Any] = field(default_factory=dict)
    what_if: dict[str, float] = field(default_factory=dict)


@dataclass(slots=True)
class Defaults:
    tolerance: float = 0.1
    window_s: float | None = None
    warmup_s: float | None = None
    peak_levels: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)
    fingerprint: str | None = None  # the workload fingerprint every claim requires (a claim's own overrides it)


def load_claims(path: str | Path) -> tuple[Defaults, list[Claim]]:
    """The defaults and claims of a file; ClaimsError naming the file, claim and field of anything wrong."""
    path = Path(path)
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ClaimsError(f"{path}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ClaimsError(f"{path}: not TOML: {exc}") from None
    defaults = _defaults(path, doc.get("verify", {}))
    raw = doc.get("claim")
    if not isinstance(raw, list) or not raw:
        raise ClaimsError(f"{path}: no [[claim]] tables")
    return defaults, [_claim(path, i + 1, c, defaults) for i, c in enumerate(raw)]


def seconds(value: object) -> float:
    """A duration: a number of seconds, or '90s', '2m', '1h'."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(s|m|min|h)?\s*", str(value))
    if not m or isinstance(value, bool):
        raise ClaimsError(f"duration {value!r}: expected seconds, or a number with s, m or h")
    return float(m.group(1)) * {None: 1, "s": 1, "m": 60, "min": 60, "h": 3600}[m.group(2)]


def fingerprint(value: object) -> str:
    """A workload fingerprint as ``replay inspect`` prints it: ``sha256:`` and 64 hex digits."""
    text = str(value).strip().lower()
    if not isinstance(value, str) or not re.fullmatch(r"sha256:[0-9a-f]{64}", text):
        raise ClaimsError(f"fingerprint {value!r}: expected sha256: and 64 hex digits, as replay inspect prints")
    return text


def _defaults(path: Path, d: dict[str, Any]) -> Defaults:
    try:
        out = Defaults()
        if "tolerance" in d:
            out.tolerance = parse_value(d["tolerance"])
        out.window_s = seconds(d["window"]) if "window" in d else None
        out.warmup_s = seconds(d["warmup"]) if "warmup" in d else None
        if "peak_levels" in d:
            out.peak_levels = tuple(int(c) for c in d["peak_levels"])
        if "fingerprint" in d:
            out.fingerprint = fingerprint(d["fingerprint"])
        return out
    except (ValueError, TypeError, UnitError) as exc:
        raise ClaimsError(f"{path}: [verify]: {exc}") from None


def _claim(path: Path, i: int, c: dict[str, Any], defaults: Defaults) -> Claim:
    name = str(c.get("name") or f"claim {i}")
    where = f"{path}: claim {i} ({name})"
    try:
        kind = c.get("kind", "measure")
        if kind == "what-if":
            return _what_if(name, c, defaults)
        if kind != "measure":
            raise ClaimsError(f"kind {kind!r}: expected measure or what-if")
        return _measure(name, c, defaults)
    except (ClaimsError, UnitError, KeyError, TypeError, ValueError) as exc:
        msg = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
        raise ClaimsError(f"{where}: {msg}") from None


def _measure(name: str, c: dict[str, Any], defaults: Defaults) -> Claim:
    metric = c["metric"]
    if metric not in METRICS:
        raise ClaimsError(f"metric {metric!r}: expected one of {', '.join(METRICS)}")
    unit = parse_unit(c["unit"])
    allowed = METRICS[metric][1]
    fits = unit.kind == "latency" if allowed == ("latency",) else (unit.kind == "rate" and unit.per in allowed)
    if not fits:
        raise ClaimsError(f"unit {unit.text!r} does not fit metric {metric} (it takes {', '.join(allowed)})")
    cond = dict(c.get("conditions", {}))
    unknown = set(cond) - set(CONDITIONS)
    if unknown:
        raise ClaimsError(f"conditions {sorted(unknown)}: expected some of {', '.join(CONDITIONS)}")
    if "fingerprint" in cond:
        cond["fingerprint"] = fingerprint(cond["fingerprint"])
    elif defaults.fingerprint:
        cond["fingerprint"] = defaults.fingerprint
    concurrency = cond.get("concurrency")
    if concurrency is None or not (concurrency == "peak" or (isinstance(concurrency, int) and concurrency >= 1)):
        raise ClaimsError("conditions.concurrency: expected a number of concurrent agents (>= 1) or 'peak'")
    check = c.get("check", "at_most" if unit.kind == "latency" else "at_least")
    if check not in CHECKS:
        raise ClaimsError(f"check {check!r}: expected one of {', '.join(CHECKS)}")
    percentile = str(cond.get("percentile", "median")).lower()
    return Claim(
        name=name,
        kind="measure",
        source=str(c.get("source", "")),
        definition=str(c.get("definition", "")),
        metric=metric,
        value=parse_value(c["value"]),
        unit=unit,
        check=check,
        tolerance=parse_value(c.get("tolerance", defaults.tolerance)),
        concurrency=concurrency,
        percentile="p50" if percentile == "median" else percentile,
        conditions=cond,
    )


WHAT_IF_FIELDS = ("output_tokens", "speed_from", "speed_to", "other_s", "tool_s")


def _what_if(name: str, c: dict[str, Any], defaults: Defaults) -> Claim:
    w = c["what_if"]
    numbers = {k: parse_value(w[k]) for k in WHAT_IF_FIELDS}
    if numbers["speed_from"] <= 0 or numbers["speed_to"] <= 0:
        raise ClaimsError("what_if speeds must be above 0")
    claimed = {k: parse_value(w[k]) for k in ("turn_from_s", "turn_to_s") if k in w}
    return Claim(
        name=name,
        kind="what-if",
        source=str(c.get("source", "")),
        definition=str(c.get("definition", "")),
        metric="what-if",
        value=parse_value(c["value"]),
        unit=parse_unit(c.get("unit", "share")),
        check=c.get("check", "within"),
        tolerance=parse_value(c.get("tolerance", defaults.tolerance)),
        what_if=numbers | claimed,
    )


def claim_levels(claim: Claim, defaults: Defaults) -> tuple[int, ...]:
    """The concurrencies a measured claim is read at: the peak levels when it asks for the peak, else its own."""
    if claim.concurrency == "peak":
        return tuple(defaults.peak_levels)
    return (claim.concurrency,) if isinstance(claim.concurrency, int) else ()


def levels_needed(claims: list[Claim], defaults: Defaults) -> list[int]:
    """Every concurrency some claim needs, once (the peak levels when a claim asks for the peak)."""
    return sorted({level for c in claims if c.kind == "measure" for level in claim_levels(c, defaults)})
