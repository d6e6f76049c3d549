"""The Grafana dashboard shipped for ``--prometheus`` (deploy/grafana/replay.json) asks only for series replay
exports, by the labels they carry: a metric renamed in replay/reports/prometheus_export.py fails here, not on a
team's wall screen."""

from __future__ import annotations

import json
import re

from prometheus_client.parser import text_string_to_metric_families

from replay.reports.prometheus_export import PrometheusSink
from tests.support.paths import ROOT

DASHBOARD = ROOT / "deploy" / "grafana" / "replay.json"
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}
GRAFANA = {"__rate_interval", "__interval", "__all"}


def exported() -> tuple[set[str], set[str]]:
    """The series names and label names replay's exposition has (read back with Prometheus' own parser)."""
    names, labels = set(), {"le"}
    for family in text_string_to_metric_families(PrometheusSink("h").exposition().decode()):
        names |= {family.name + s for s in SUFFIXES[family.type]}
        labels |= {"host"} | {label for s in family.samples for label in s.labels}
    return names, labels | {"outcome", "kind", "status"}  # the counters' own labels, present once counted


def exprs(dash: dict) -> list[str]:
    found = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    found += [v["definition"] for v in dash["templating"]["list"] if v.get("definition")]
    return found


def test_every_series_the_dashboard_asks_for_is_exported():
    names, _ = exported()
    dash = json.loads(DASHBOARD.read_text())
    asked = {m for e in exprs(dash) for m in re.findall(r"\breplay_[a-z0-9_]+", e)}
    assert asked and asked <= names, asked - names
    # every family replay exports is on the dashboard (a new one is drawn, or left out here on purpose)
    assert {n.removesuffix("_bucket") for n in asked if n.endswith("_bucket")} >= {
        "replay_ttft_seconds", "replay_e2e_seconds", "replay_user_decode_tokens_per_second"}  # fmt: skip
    assert {"replay_requests_total", "replay_tokens_total", "replay_tasks_total", "replay_steady_window_open"} <= asked


def test_every_label_the_dashboard_uses_is_exported():
    _, labels = exported()
    dash = json.loads(DASHBOARD.read_text())
    used = set()
    for e in exprs(dash):
        used |= {g for grp in re.findall(r"by \(([^)]*)\)", e) for g in re.split(r",\s*", grp)}
        used |= set(re.findall(r"[{,]\s*([a-z_]+)\s*(?:=~|!=|=)", e))
        used |= set(re.findall(r"label_values\([a-z_]+, ([a-z_]+)\)", e))
    assert used and used <= labels, used - labels
    refs = {r for e in exprs(dash) for r in re.findall(r"\$(\w+)", e)}
    assert refs <= {v["name"] for v in dash["templating"]["list"]} | GRAFANA, refs
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
