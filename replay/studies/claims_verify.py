"""Verifying a claims file: the runs its claims need, each claim's figure in its own unit, and the verdicts.

Every concurrency the claims name is run once by the study's runner (real time or the virtual clock), so claims
at the same level share a run. Each measured claim reads its figure from that run's summary (the percentile it
names, where the summary has it), converts it with ``claim_units.from_base`` and is judged at its tolerance; a
``peak`` claim takes the best level of ``peak_levels``. Conditions the host or workload cannot be shown to meet
(other hardware, another model, another workload or corpus fingerprint, output lengths far from the claim's) are
listed, not hidden.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from replay.hosts.hardware import Hardware
from replay.metrics.level_figures import value
from replay.studies.claim_units import UnitError, from_base, project_wall
from replay.studies.claims import CLAIMS_FORMAT, DEFINITIONS, METRICS, Claim, Defaults, claim_levels, levels_needed
from replay.studies.levels import Level, Runner

OUTPUT_LENGTH_SLACK = 0.25  # a claim's output length "matches" the workload's mean within 25 %
# The unit of the summary figure a claim reads (``figure``), before it is converted to the claim's unit (``unit``).
FIGURE_UNITS = {"total_tokens": "tokens/s", "output_tokens": "tokens/s", "output_speed": "tokens/s/user",
                "ttft": "s", "ttfat": "s", "e2e": "s"}  # fmt: skip


@dataclass(slots=True)
class HostFacts:
    """What the host and the workload are, for matching a claim's conditions."""

    label: str
    hardware: Hardware
    description: str | None = None  # a sim profile's description; None for a real host
    model: str | None = None
    workload: str = ""
    mean_output_tokens: float | None = None
    fingerprint: str = ""  # the workload's (workload/fingerprint.py)


def verdict(claimed: float, measured: float | None, check: str, tolerance: float) -> str:
    """pass | fail | not measured: at_least passes from claimed x (1 - tol), at_most up to claimed x (1 + tol),
    within when |measured - claimed| <= tol x claimed."""
    if measured is None:
        return "not measured"
    if check == "at_least":
        ok = measured >= claimed * (1 - tolerance)
    elif check == "at_most":
        ok = measured <= claimed * (1 + tolerance)
    else:
        ok = abs(measured - claimed) <= tolerance * abs(claimed)
    return "pass" if ok else "fail"


def _percentile(claim: Claim) -> tuple[str, list[str]]:
    """The summary percentile to read, and a note when the claim's own is not one replay reports."""
    have = METRICS[claim.metric][2]
    if not have or claim.percentile in have:
        return claim.percentile, []
    wanted = int(claim.percentile.lstrip("p")) if claim.percentile.lstrip("p").isdigit() else 50
    nearest = min(have, key=lambda p: abs(int(p[1:]) - wanted))
    return nearest, [f"percentile: claimed {claim.percentile}, replay reports {', '.join(have)}; used {nearest}"]


def measure(claim: Claim, summary: dict[str, Any], gpus: int | None) -> tuple[float | None, str, list[str]]:
    """(the claim's figure from one run, in its unit; the summary key read; conditions it could not match)."""
    key, _, percentiles = METRICS[claim.metric]
    unmatched: list[str] = []
    if percentiles:
        p, unmatched = _percentile(claim)
        key = f"{key}.{p}"
    base = value(summary, key)
    if base is None:
        return None, key, [*unmatched, f"the run has no figure {key}"]
    try:
        return from_base(base, claim.unit, gpus), key, unmatched
    except UnitError as exc:
        return None, key, [*unmatched, str(exc)]


def conditions(claim: Claim, facts: HostFacts) -> tuple[list[str], list[str]]:
    """(matched, unmatched) conditions of a claim against the host and workload."""
    matched: list[str] = []
    unmatched: list[str] = []
    cond = claim.conditions
    if "gpus" in cond:
        gpus = facts.hardware.gpus
        ok = gpus == cond["gpus"]
        (matched if ok else unmatched).append(f"gpus: claimed {cond['gpus']}, host {gpus if gpus else 'unknown'}")
    for name, have in (("hardware", facts.description), ("model", facts.model or facts.description)):
        if name in cond:
            ok = bool(have) and str(cond[name]).lower() in str(have).lower()
            (matched if ok else unmatched).append(f"{name}: claimed {cond[name]!r}, host {have or 'unknown'!r}")
    if "workload" in cond:
        ok = str(cond["workload"]).lower() in ("any", facts.workload.lower())
        (matched if ok else unmatched).append(f"workload: claimed {cond['workload']!r}, replayed {facts.workload!r}")
    if "fingerprint" in cond:
        ok = cond["fingerprint"] == facts.fingerprint
        text = f"fingerprint: claimed {cond['fingerprint']}, replayed {facts.fingerprint or 'unknown'}"
        (matched if ok else unmatched).append(text if ok else text + " (another corpus)")
    if "output_tokens" in cond and facts.mean_output_tokens is not None:
        want, mean = float(cond["output_tokens"]), facts.mean_output_tokens
        ok = abs(mean - want) <= OUTPUT_LENGTH_SLACK * want
        text = f"output length: claimed {want:,.0f} tokens, workload mean {mean:,.0f} per call"
        (matched if ok else unmatched).append(text)
    if cond.get("concurrency") is not None:
        matched.append(f"concurrency: {cond['concurrency']}")
    return matched, unmatched


def _what_if_row(claim: Claim) -> dict[str, Any]:
    w = claim.what_if
    decode_from = w["output_tokens"] / w["speed_from"]
    turn_from = decode_from + w["other_s"] + w["tool_s"]
    turn_to = project_wall(turn_from, decode_from, w["speed_to"] / w["speed_from"])
    reduction = 1 - turn_to / turn_from
    checks = [verdict(claim.value, reduction, claim.check, claim.tolerance)]
    for key, got in (("turn_from_s", turn_from), ("turn_to_s", turn_to)):
        if key in w:
            checks.append(verdict(w[key], got, "within", claim.tolerance))
    return {
        "measured": reduction,
        "verdict": "pass" if all(c == "pass" for c in checks) else "fail",
        "details": {"turn_from_s": turn_from, "turn_to_s": turn_to, "reduction": reduction},
        "unmatched": [],
        "matched": ["arithmetic: no run needed"],
    }


def _claim_row(claim: Claim, levels: dict[int, Level], facts: HostFacts, defaults: Defaults) -> dict[str, Any]:
    figure_value: float | None = None
    if claim.kind == "what-if":
        row = _what_if_row(claim)
        key, at = "tasks.projected_wall_s", None
    else:
        candidates = claim_levels(claim, defaults)
        measured = [(measure(claim, levels[c].summary, facts.hardware.gpus), c) for c in candidates if c in levels]
        good = [(m[0], m, c) for m, c in measured if m[0] is not None]
        pick = max if claim.unit.kind == "rate" else min
        (value_, key, unmatched), at = pick(good, key=lambda g: g[0])[1:] if good else (measured[0][0], None)
        matched, more = conditions(claim, facts)
        row = {"measured": value_, "unmatched": [*unmatched, *more], "matched": matched}
        row["verdict"] = verdict(claim.value, value_, claim.check, claim.tolerance)
        figure_value = value(levels[at].summary, key) if at in levels else None
    measured_value = row["measured"]
    p = claim.percentile
    return {
        "name": claim.name,
        "claimed": claim.value,
        "measured": measured_value,
        "unit": claim.unit.text,
        "ratio": measured_value / claim.value if measured_value is not None and claim.value else None,
        "verdict": row["verdict"],
        "check": claim.check,
        "tolerance": claim.tolerance,
        "metric": claim.metric,
        "figure": key,  # the summary figure read: its value in its own unit, before the conversion to ``unit``
        "figure_value": figure_value,
        "figure_unit": "share" if claim.kind == "what-if" else FIGURE_UNITS[claim.metric],
        "concurrency": at,
        "run_file": levels[at].run if at in levels else None,
        "definition": DEFINITIONS[claim.metric].format(p=p),
        "claim_definition": claim.definition,
        "source": claim.source,
        "matched": row["matched"],
        "unmatched": row["unmatched"],
        **({"details": row["details"]} if "details" in row else {}),
    }


def verify(
    claims: list[Claim],
    defaults: Defaults,
    runner: Runner,
    facts: HostFacts,
    on_level: Callable[[Level], None] | None = None,
) -> tuple[list[dict[str, Any]], dict[int, Level]]:
    """Run every level the claims need (once each), then judge every claim."""
    levels: dict[int, Level] = {}
    for c in levels_needed(claims, defaults):
        levels[c] = runner(c, 1)
        if on_level:
            on_level(levels[c])
    if facts.model is None and facts.description is None:  # a real host: the model it served, as the runs recorded
        facts.model = _served_model(levels)
    return [_claim_row(cl, levels, facts, defaults) for cl in claims], levels


def _served_model(levels: dict[int, Level]) -> str | None:
    """The model named in the first run file's header (what --model said, or what the host listed)."""
    import orjson

    for lv in levels.values():
        if lv.run:
            with open(lv.run, "rb") as f:
                return (orjson.loads(f.readline()).get("host") or {}).get("model")
    return None


def report(file: str, facts: HostFacts, mode: str, rows: list[dict[str, Any]], levels: dict[int, Level]) -> dict:
    """The verification as JSON (``replay claims verify --json``)."""
    return {
        "format": CLAIMS_FORMAT,
        "file": file,
        "host": facts.label,
        "mode": mode,
        "hardware": facts.hardware.public(),
        "runs": len(levels),
        "levels": {str(c): lv.run for c, lv in sorted(levels.items())},
        "claims": rows,
        "verdicts": {v: sum(r["verdict"] == v for r in rows) for v in ("pass", "fail", "not measured")},
    }
