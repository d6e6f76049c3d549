"""The studies for people: a sweep's table and knee, a capacity search's probes and answer, comparisons side by
side and the claims' verdicts, as terminal text. Each function takes the study's JSON (what ``--json`` prints),
so the text and the JSON can never disagree.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from replay.metrics.level_figures import FIGURES, value
from replay.workload.words import plural


def fmt(v: float | None, unit: str) -> str:
    """A figure as people read it: tokens with thousands separators, seconds in ms under 1 s, shares in %."""
    if v is None:
        return "-"
    if unit == "s":
        if abs(v) < 0.01:
            return f"{v * 1000:.1f} ms"
        return f"{v * 1000:,.0f} ms" if abs(v) < 1 else f"{v:,.2f} s"
    if unit == "share":
        return f"{100 * v:.1f}%"
    if unit == "tok/min":
        return f"{v / 1e6:,.2f}M"
    if unit == "x":
        return f"{v:.3f}x"
    if unit == "usd":
        return f"${v:,.4g}"
    return f"{v:,.1f}" if abs(v) < 100 else f"{v:,.0f}"


def grid(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain table: first column left-aligned, the others right-aligned."""
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]

    def line(cells: Sequence[str]) -> str:
        first = f"{cells[0]!s:<{widths[0]}}"
        return "  ".join([first, *[f"{c!s:>{w}}" for c, w in zip(cells[1:], widths[1:], strict=True)]]).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths]), *map(line, rows)])


SWEEP_COLUMNS = (
    ("total tok/s", "throughput.total_tps", "tok/s"),
    ("output tok/s", "throughput.output_tps", "tok/s"),
    ("TTFT p50", "ttft_s.p50", "s"),
    ("TTFT p95", "ttft_s.p95", "s"),
    ("answer p50", "ttfat_s.p50", "s"),
    ("decode p25", "user_decode_tps.p25", "tok/s"),
    ("decode p50", "user_decode_tps.p50", "tok/s"),
    ("E2E intvty p90", "interactivity_e2e.p90", "tok/s"),
    ("cache hit", "cache.host_hit_ratio", "share"),
    ("errors", "error_rate", "share"),
)


# With a per-call SLO (--slo 'ttft<=2s,...'): each level's goodput over its steady window (docs/metrics.md, Goodput).
GOODPUT_COLUMNS = (
    ("calls met", "goodput.calls_met_share", "share"),
    ("tasks met", "goodput.tasks_met_share", "share"),
    ("good out tok/s", "goodput.output_tps", "tok/s"),
)
GOODPUT_NOTE = (
    "goodput at the per-call SLO {slo}: calls met = the level's calls sent in its steady window that met every term;"
    " tasks met = its complete tasks whose every call met it; good out tok/s = the met calls' output tokens over the"
    " window"
)


def level_columns(sw: dict[str, Any]) -> tuple[tuple[str, str, str], ...]:
    """The sweep table's figure columns: goodput's too where the levels were judged at a per-call SLO."""
    return SWEEP_COLUMNS + (GOODPUT_COLUMNS if sw.get("goodput_slo") else ())


def warmup_words(sw: dict[str, Any]) -> str:
    """Each level's warm-up as the sweep ran it: timed (``--warmup``), or a recipe's own that opens the window."""
    if sw.get("warmup_s") is None:
        return (f"{sw.get('recipe')}'s warm-up ({sw.get('warmup_per_lane')} calls per lane at max_tokens 1, then a "
                "barrier)")  # fmt: skip
    return f"{sw['warmup_s']:g} s warm-up"


def recipe_words(sw: dict[str, Any]) -> str:
    return f"; each level a --recipe {sw['recipe']} run" if sw.get("recipe") else ""


def sweep_text(sw: dict[str, Any]) -> str:
    """The sweep's table (a row per level), its knee with the rule, and its frontier."""
    rows = []
    columns = level_columns(sw)
    for lv in sw["levels"]:
        cells = [str(lv["concurrency"]), *[fmt(value(lv, key), unit) for _, key, unit in columns]]
        if "slo_ok" in lv:
            cells.append("yes" if lv["slo_ok"] else "no")
        rows.append(cells)
    headers = ["sessions", *[h for h, _, _ in columns], *(["SLO"] if sw.get("slo") else [])]
    knee = sw["knee"]
    where = f"{knee['concurrency']} sessions" if knee["concurrency"] is not None else "none"
    front = ", ".join(str(p["concurrency"]) for p in sw["frontier"]) or "-"
    lines = [
        f"sweep against {sw['host']} ({sw['mode']}): {plural(len(sw['levels']), 'level')}, {warmup_words(sw)}"
        f" then a {sw['window_s']:g} s window each{recipe_words(sw)}; sessions {sw['sessions']}",
        "",
        grid(headers, rows),
        *([GOODPUT_NOTE.format(slo=",".join(sw["goodput_slo"]))] if sw.get("goodput_slo") else []),
        "",
        f"knee: {where}  [{knee['rule']}]" + (f"  ({knee['note']})" if knee.get("note") else ""),
        f"Pareto frontier ({_x_label(sw)} against total tok/s per {'GPU' if sw['hardware']['gpus'] else 'host'}):"
        f" levels {front}",
    ]
    return "\n".join(lines)


def _x_label(sw: dict[str, Any]) -> str:
    return (sw.get("frontier_axes") or {}).get("x_label") or "per-user decode speed p25 (tokens/s)"


def capacity_text(cap: dict[str, Any]) -> str:
    """Every probe in the order it ran, the answer, its uncertainty and the answer per GPU / kW / MW / dollar."""
    rows = []
    for p in cap["probes"]:
        checks = "; ".join(f"{c['figure']}={_num(c['value'])}" for c in p["checks"])
        rows.append([str(p["concurrency"]), p["step"], "held" if p["ok"] else "broke", checks])
    per = [
        f"{_num(cap[k])} {label}"
        for k, label in (("per_gpu", "per GPU"), ("per_kw", "per kW"), ("per_mw", "per MW"))
        if cap.get(k) is not None
    ]
    if cap.get("per_dollar_hour") is not None:
        per.append(f"{_num(cap['per_dollar_hour'])} per dollar-hour")
    lines = [
        f"capacity of {cap['host']} ({cap['mode']}) at SLO {', '.join(cap['slo'])}",
        "",
        grid(["agents", "step", "SLO", "figures"], rows),
        "",
        f"max concurrency: {cap['max_concurrency']} agents"
        + (f" ({', '.join(per)})" if per else "")
        + f", in {plural(cap['runs'], 'run')}"
        + f" (a sweep 1, 2, 3, ... to the first that breaks: {cap['full_sweep_runs']})",
        f"uncertainty: {cap['uncertainty']['text']}",
        f"power: {cap['power_note']}",
    ]
    return "\n".join(lines)


def tiers_text(doc: dict[str, Any]) -> str:
    """Each tier's answer (per GPU / MW / dollar-hour where known), the runs it took, and the levels run."""
    rows = []
    for t in doc["tiers"]:
        per = [_num(t.get(k)) if t.get(k) is not None else "-" for k in ("per_gpu", "per_mw", "per_dollar_hour")]
        broke = "-" if t["first_broken"] is None else str(t["first_broken"])
        rows.append([t["name"], f"{_num(t['ttft_s'])} s", f"{_num(t['speed_tps'])}", str(t["max_concurrency"]),
                     broke, *per, str(t["runs"])])  # fmt: skip
    levels = ", ".join(f"{lv['concurrency']}" + (f" (#{lv['attempt']})" if lv["attempt"] > 1 else "")
                       for lv in doc["levels"])  # fmt: skip
    return "\n".join([
        f"capacity of {doc['host']} ({doc['mode']}) per SLO tier (TTFT p75 within the limit, per-user decode p25 at "
        "least the floor)",
        "",
        grid(["tier", "TTFT", "tok/s", "max agents", "broke at", "per GPU", "per MW", "per $/h", "probes"], rows),
        "",
        f"{plural(doc['runs'], 'run')} for all tiers ({doc['separate_runs']} probes in all, as separate searches "
        f"would run them): levels {levels}",
        *(f"{t['name']}: {t['uncertainty']['text']}" for t in doc["tiers"]),
        f"power: {doc['power_note']}",
    ])  # fmt: skip


def better_mark(f: dict[str, Any], better: str, worse: str) -> str:
    """A compared figure's mark: ``better`` or ``worse`` when B's side is known (``b_better``), else nothing."""
    b_better = f.get("b_better")
    return "" if b_better is None else (better if b_better else worse)


def _verdict(f: dict[str, Any]) -> str:
    ci = f.get("ci")
    interval = f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else ""
    mark = better_mark(f, " (better)", " (worse)")
    return f"{f['verdict']}{mark}{interval}"


def figures_table(figures: list[dict[str, Any]], a: str, b: str) -> str:
    rows = [
        [f["label"], fmt(f["a"], f["unit"]), fmt(f["b"], f["unit"]), fmt(f["ratio"], "x"), _verdict(f)] for f in figures
    ]
    return grid(["figure", a, b, "B/A", "B against A: verdict [95% interval]"], rows)


def _costs(c: dict[str, Any]) -> str:
    parts = []
    if c.get("price_per_hour"):
        parts.append(
            f"${c['price_per_hour']:,.2f}/h: {fmt(c['per_task'], 'usd')} per task,"
            f" {fmt(c['per_million_tokens'], 'usd')} per M tokens, {fmt(c['per_million_output_tokens'], 'usd')} per M"
            " output tokens"
        )
    if c.get("rate_card"):
        parts.append(
            f"rate card {c['rate_card']}: {fmt(c.get('rate_card_per_task'), 'usd')} per task,"
            f" {fmt(c.get('rate_card_per_million_tokens'), 'usd')} per M tokens"
        )
    return "; ".join(parts) or "no price given (--price-per-hour, or a rate card: --rate-card or the hosts file)"


def compare_text(cmp: dict[str, Any]) -> str:
    """Two runs (or two sweeps level by level) side by side with ratios and verdicts."""
    a, b = cmp["a"]["name"], cmp["b"]["name"]
    lines = [f"A = {a}  ({cmp['a'].get('host') or ''})", f"B = {b}  ({cmp['b'].get('host') or ''})", ""]
    if cmp["kind"] == "sweeps":
        for lv in cmp["levels"]:
            lines += [f"{lv['concurrency']} sessions", figures_table(lv["figures"], "A", "B"), ""]
        lines.append(f"knee: A {cmp['knee']['a']['concurrency']}, B {cmp['knee']['b']['concurrency']}")
    else:
        lines.append(figures_table(cmp["figures"], "A", "B"))
        lines += ["", f"cost A: {_costs(cmp['costs']['a'])}", f"cost B: {_costs(cmp['costs']['b'])}"]
    lines += ["", f"noise: {cmp['noise']['method']}; {cmp['noise']['interval']}"]
    lines += [f"note: {n}" for n in cmp.get("notes", [])]
    if cmp.get("agreement"):
        lines.append(agreement_line("A", "B", cmp["agreement"]))
    return "\n".join(lines)


def hosts_text(h: dict[str, Any]) -> str:
    """Every host's headline figures in a column each, with each one's ratio to the first host."""
    if h["kind"] == "host sweeps":
        return "\n\n".join(compare_text(c) for c in h["comparisons"]) + f"\n\nhosts run {h['mode']}"
    names = [r["name"] for r in h["runs"]]
    comparisons = h["comparisons"]
    headers = ["figure", names[0], *[f"{n} (x first)" for n in names[1:]]]
    rows = []
    for i, f in enumerate(FIGURES):
        cells = [f.label, fmt(comparisons[0]["figures"][i]["a"], f.unit)]
        for cmp in comparisons:
            g = cmp["figures"][i]
            cells.append(f"{fmt(g['b'], f.unit)} ({fmt(g['ratio'], 'x')}, {g['verdict']})")
        rows.append(cells)
    lines = [grid(headers, rows), "", f"cost {names[0]}: {_costs(comparisons[0]['costs']['a'])}"]
    for name, cmp in zip(names[1:], comparisons, strict=True):
        lines.append(f"cost {name}: {_costs(cmp['costs']['b'])}")
        lines += [f"note ({name}): {n}" for n in cmp.get("notes", [])]
        if cmp.get("agreement"):
            lines.append(agreement_line(names[0], name, cmp["agreement"]))
    lines.append(f"hosts run {h['mode']}; noise: {comparisons[0]['noise']['method']}")
    return "\n".join(lines)


def agreement_line(a: str, b: str, ag: dict[str, Any]) -> str:
    """Whether two hosts answered the same (replay.metrics.agreement), in one line."""
    if not ag["pairs"]:
        return f"answers {a} / {b}: not compared, " + ag.get("why", "no call answered by both")
    where = ag["first_divergence_mean"]
    differ = "" if where is None else f"; where they differ, the first differing token is #{where:.1f} on average"
    return (f"answers {a} / {b}: {ag['exact_share']:.1%} identical over {ag['pairs']} calls answered by both"
            f"{differ} (greedy sampling, temperature 0, makes this a check of 'the same model')")  # fmt: skip


def claims_text(report: dict[str, Any]) -> str:
    """The claims' verdict table and the conditions each could not match."""
    rows = []
    for c in report["claims"]:
        ratio = "-" if c["ratio"] is None else f"{c['ratio']:.3f}"
        rows.append([c["name"], _num(c["claimed"]), _num(c["measured"]), c["unit"], ratio, c["verdict"]])
    lines = [
        f"claims of {report['file']} against {report['host']} (tolerance per claim; {plural(report['runs'], 'run')})",
        "",
        grid(["claim", "claimed", "measured", "unit", "ratio", "verdict"], rows),
        "",
    ]
    for c in report["claims"]:
        if c["unmatched"]:
            lines.append(f"{c['name']}: could not match {'; '.join(c['unmatched'])}")
    return "\n".join(lines).rstrip()


def _num(v: float | None) -> str:
    if v is None:
        return "-"
    if abs(v) >= 1e6:
        return f"{v / 1e6:,.2f}M"
    return f"{v:.3g}" if abs(v) < 100 else f"{v:,.0f}"
