"""`replay report RUN --html F --csv DIR --json` on a real run against the simulated host."""

from __future__ import annotations

import builtins
import csv
import re
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from replay.cli import main
from replay.records.reader import read_run
from replay.reports.csv_export import REQUEST_COLUMNS
from tests.support.report_runs import recorded_run

SECTIONS = ("headline", "latency", "throughput", "cache", "tasks", "client", "served", "truth", "distributions",
            "over-time", "sessions", "by-context", "by-turn", "recorded")  # fmt: skip


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> tuple:
    """One run, then one report writing every output; (run, summary, html text, csv directory)."""
    pytest.importorskip("matplotlib")
    tmp = tmp_path_factory.mktemp("report")
    path = recorded_run(tmp)
    html, out = tmp / "report.html", tmp / "csv"
    res = CliRunner().invoke(main, ["report", str(path), "--json", "--html", str(html), "--csv", str(out)])
    assert res.exit_code == 0, res.output
    return read_run(path), orjson.loads(res.stdout), html.read_text(), out


def test_json_breakdown_covers_the_window_and_the_recorded_timeline(report) -> None:
    run, summary, _, _ = report
    b = summary["breakdown"]
    assert sum(r["requests"] for r in b["by_turn"]) == sum(r["requests"] for r in b["by_context"])
    assert sum(r["requests"] for r in b["by_turn"]) == summary["window"]["requests"] > 0
    assert {r["bucket"] for r in b["by_turn"] if r["requests"]} <= {"0", "1", "2-3", "4-7"}  # 3 to 5 turns
    rt = b["recorded_timeline"]
    done = [t for t in run.tasks if t.complete]
    assert rt["tasks"] == len(done) == 6 and rt["tool_time_policy"] == "recorded" and rt["notes"] == []
    recorded = [0.04 * t.turns_total for t in done]
    assert rt["model_time_s"]["recorded_mean"] == pytest.approx(sum(recorded) / 6)
    assert rt["model_time_s"]["replayed_mean"] == pytest.approx(sum(t.model_time_s for t in done) / 6)
    assert rt["tool_time_s"]["recorded_mean"] == pytest.approx(sum(0.02 * (t.turns_total - 1) for t in done) / 6)


def test_html_is_one_self_contained_page_with_every_section(report) -> None:
    _, summary, page, _ = report
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert not re.search(r"<(script|link|img|iframe|object)\b", page), "nothing to load, nothing to run"
    assert not re.search(r"""(src|href)=["'](?!#)""", page), "every link stays inside the page"
    assert not re.search(r"url\((?!#)", page) and "@import" not in page and "@font-face" not in page
    for sid in SECTIONS:
        assert f'<section id="{sid}">' in page and f'href="#{sid}"' in page
    assert page.count("<svg") == 6  # distributions, over time, sessions, two breakdowns, recorded timeline
    assert f"<b>{summary['throughput']['total_tps']:,.0f}</b>" in page  # the headline is the summary's figure
    assert "No fallback found" in page and "calls in flight when sent" in page  # the served section's own words


def test_svg_ids_are_unique_in_the_page_and_resolve_inside_their_figure(report) -> None:
    page = report[2]
    ids = re.findall(r'\bid="([^"]+)"', page)
    assert len(ids) == len(set(ids))
    for svg in re.findall(r"<svg.*?</svg>", page, flags=re.S):
        own = set(re.findall(r'\bid="([^"]+)"', svg))
        refs = set(re.findall(r'(?:href="#|url\(#)([^")]+)', svg))
        assert refs and refs <= own


def test_csv_rows_are_the_records_and_the_summary(report) -> None:
    run, summary, _, out = report
    rows = list(csv.DictReader((out / "requests.csv").open()))
    assert sorted(r["id"] for r in rows) == sorted(r.id for r in run.requests)
    start = run.phases["start"]
    by_id = {r.id: r for r in run.requests}
    for row in rows:
        rec = by_id[row["id"]]
        assert float(row["t_sent_s"]) == pytest.approx(rec.t_sent - start, abs=1e-9)
        assert float(row["ttft_s"]) == pytest.approx(rec.t_first_token - rec.t_sent, abs=1e-9)
        assert int(row["cached_tokens"]) == rec.cached_tokens and row["error"] == ""
    assert sum(int(r["in_window"]) for r in rows) == summary["window"]["requests"]
    flat = dict(csv.reader((out / "summary.csv").open()))
    assert float(flat["throughput.total_tps"]) == summary["throughput"]["total_tps"]
    assert int(flat["breakdown.by_turn.0.requests"]) == summary["breakdown"]["by_turn"][0]["requests"]
    assert flat["window.steady"] == "1" and flat["breakdown.recorded_timeline.notes"] == ""
    assert float(flat["truth.ttft_dev_s.p50"]) == summary["truth"]["ttft_dev_s"]["p50"]


def test_a_run_file_with_no_calls_still_reports(report, tmp_path: Path) -> None:
    run_file = Path(report[3]).parent / "run.jsonl"
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(run_file.read_bytes().split(b"\n", 1)[0] + b"\n")  # the header alone: a run killed at once
    html, out = tmp_path / "empty.html", tmp_path / "csv"
    res = CliRunner().invoke(main, ["report", str(empty), "--html", str(html), "--csv", str(out)])
    assert res.exit_code == 0, res.output
    page = html.read_text()
    assert "<svg" not in page and page.count("No calls recorded.") == 2
    assert "No successful call in the steady window." in page
    assert (out / "requests.csv").read_text().splitlines() == [",".join(REQUEST_COLUMNS)]


def test_html_without_matplotlib_names_the_extra(report, tmp_path: Path, monkeypatch) -> None:
    run_file = Path(report[3]).parent / "run.jsonl"
    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    out = tmp_path / "r.html"
    res = CliRunner().invoke(main, ["report", str(run_file), "--html", str(out)])
    assert res.exit_code == 1 and not out.exists()
    assert res.output.strip() == "Error: --html needs matplotlib: pip install 'agentic-replay[plots]'"


def test_unwritable_outputs_are_one_line_errors(report, tmp_path: Path) -> None:
    run_file = Path(report[3]).parent / "run.jsonl"
    (tmp_path / "file").write_text("")
    for args in (["--html", str(tmp_path / "no" / "r.html")], ["--csv", str(tmp_path / "file" / "sub")]):
        res = CliRunner().invoke(main, ["report", str(run_file), *args])
        assert res.exit_code == 1 and res.output.splitlines()[-1].startswith("Error: "), res.output
        assert "Traceback" not in res.output


def test_csv_cells_a_host_wrote_never_run_as_formulas(tmp_path: Path) -> None:
    """Issue 25: a finish reason (or any text a host sends) written raw once ran as a spreadsheet formula."""
    from replay.records.run_file import RequestRecord, RunData
    from replay.reports.csv_export import write_csv

    odd = ['=HYPERLINK("http://x")', "+1+1", "-2", "@SUM(A1)", "\tx", "stop"]
    requests = [RequestRecord(id=f"r{i}", session=0, task=0, trajectory="t", turn=i, t_sent=float(i), t_done=i + 0.5,
                              finish_reason=reason, error="=cmd|' /C calc'!A0" if i == 0 else None)
                for i, reason in enumerate(odd)]  # fmt: skip
    run = RunData(header={}, requests=requests, tasks=[], phases={"start": 0.0}, client=[], footer=None)
    paths = write_csv(run, {"routes": {"=evil": 1.0}}, tmp_path)
    rows = list(csv.DictReader(paths[0].open(encoding="utf-8")))
    assert [r["finish_reason"] for r in rows] == ["'" + x for x in odd[:5]] + ["stop"]
    assert rows[0]["error"] == "'=cmd|' /C calc'!A0"
    summary = paths[1].read_text(encoding="utf-8")
    assert "routes.=evil" in summary  # keys are replay's own dotted paths; the host's name inside one is no formula
    for line in csv.reader(summary.splitlines()):
        assert not line[1].startswith(("=", "+", "@")), line
