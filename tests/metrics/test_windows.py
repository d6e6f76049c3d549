"""Windows: written as they close, they rebuild the run's summary, summarise any span, and show a host changing."""

from __future__ import annotations

import dataclasses
import itertools
import tracemalloc
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from replay.cli import main
from replay.metrics.streaming import summarize_file
from replay.metrics.summary import steady_window, summarize
from replay.metrics.windows import rebuild, series, span
from replay.records.reader import read_run
from tests.support.trajectories import simple_turns, write_trajectory


def _workload(tmp_path: Path) -> Path:
    path = tmp_path / "w.jsonl"
    for i in range(8):
        write_trajectory(path, f"w{i}", simple_turns(40, output_tokens=60, tool_time_s=0.05))
    return path


def _run(tmp_path: Path, *args: str) -> Path:
    out = tmp_path / "run.jsonl"
    res = CliRunner().invoke(main, ["run", str(_workload(tmp_path)), "-c", "6", "--out", str(out), "-q", *args])
    assert res.exit_code == 0, res.output
    return out


@pytest.fixture(scope="module")
def windowed(tmp_path_factory) -> Path:
    return _run(
        tmp_path_factory.mktemp("w"),
        "--sim-profile",
        "fast",
        "--duration",
        "6",
        "--window",
        "1.5",
        "--rate-card",
        "groq/gpt-oss-120b",
        "--slo",
        "ttft<=25ms,user_decode_tps>=100",
    )


def test_window_records_rebuild_the_whole_runs_summary(windowed: Path) -> None:
    summary, data = summarize_file(windowed)
    windows = [m for m in data.marks if m["type"] == "window"]
    assert 4 <= len(windows) <= 6 and [w["index"] for w in windows] == list(range(len(windows)))
    assert all(a["t_end"] == b["t_start"] for a, b in itertools.pairwise(windows))
    rebuilt = rebuild(data, steady_window(read_run(windowed)))
    assert rebuilt == summary  # the same histograms and sums: the same figures, exactly
    assert summary["goodput"]["calls"] == summary["window"]["requests"] > 0  # goodput's counts merge too
    assert summary["cost"]["total_usd"] > 0 and summary["cost"]["priced_requests"] == summary["requests"]
    assert summarize(read_run(windowed)) == summary  # and the same as from the list of all its records


def test_a_span_is_summarised_from_its_windows(windowed: Path) -> None:
    _, data = summarize_file(windowed)
    rows = series(data)
    part = span(data, 1.5, 4.5)  # the windows whose middle lies in 1.5 .. 4.5 s
    inside = [w for w in rows if 1.5 <= (w["start_s"] + w["end_s"]) / 2 < 4.5]
    assert part["requests"] == sum(w["requests"] for w in inside) > 0
    expected = sum(w["total_tps"] * (w["end_s"] - w["start_s"]) for w in inside) / part["window_s"]
    assert part["throughput"]["total_tps"] == pytest.approx(expected)
    res = CliRunner().invoke(main, ["report", str(windowed), "--from", "1.5", "--to", "4.5", "--json"])
    assert res.exit_code == 0 and orjson.loads(res.stdout)["requests"] == part["requests"]
    text = CliRunner().invoke(main, ["report", str(windowed)]).output
    assert "Over time (" in text and "calls completed in each" in text


def test_a_host_that_speeds_up_shows_it_window_by_window(tmp_path: Path) -> None:
    profile = tmp_path / "warming.toml"
    profile.write_text('base = "speculator-warmup"\nname = "warming"\nspeedup_after_s = 1.5\nspeedup_ramp_s = 2.0\n')
    out = _run(tmp_path, "--sim-profile-file", str(profile), "--duration", "7", "--window", "1.5", "--tool-time",
               "none")  # fmt: skip
    rows = series(summarize_file(out)[1])
    early, late = rows[0]["user_decode_tps_p50"], rows[-2]["user_decode_tps_p50"]
    assert late > 1.5 * early  # the profile doubles decode speed between 1.5 s and 3.5 s of uptime
    pytest.importorskip("matplotlib")
    html = tmp_path / "r.html"
    res = CliRunner().invoke(main, ["report", str(out), "--html", str(html)])
    assert res.exit_code == 0, res.output
    page = html.read_text()
    section = page[page.index('<section id="windows">') :]
    section = section[: section.index("</section>")]
    assert f"({len(rows)} windows)" in section and "<svg" in section  # the time series the speed-up shows in


def test_a_span_without_windows_is_a_clear_error(tmp_path: Path) -> None:
    out = _run(tmp_path, "--sim-profile", "instant", "--tasks", "2", "--tool-time", "none")
    res = CliRunner().invoke(main, ["report", str(out), "--from", "0", "--to", "1"])
    assert res.exit_code == 1 and "no window records" in res.output


def test_each_windows_goodput_equals_a_recount_and_the_page_draws_it(windowed: Path, tmp_path: Path) -> None:
    """The simulated host in real time, --window 1.5 --slo: every window's goodput is that of the calls and tasks
    written in it, recounted from the run file by tests/support/recount.py (standard library only)."""
    from tests.support import recount

    summary, data = summarize_file(windowed)
    rows = series(data)
    theirs = recount.window_goodput(windowed, [("ttft", "<=", 0.025), ("user_decode_tps", ">=", 100.0)])
    assert [w["index"] for w in rows] == [t["index"] for t in theirs]
    for w, t in zip(rows, theirs, strict=True):
        g = w["goodput"]
        assert g["slo"] == "ttft<=25ms,user_decode_tps>=100"
        for key in ("calls", "calls_met", "calls_met_share", "tasks", "tasks_met", "tasks_met_share"):
            assert g[key] == t[key], (w["index"], key)
        for key in ("output_tps", "total_tps"):
            assert g[key] == pytest.approx(t[key], rel=1e-12), (w["index"], key)
    assert sum(w["goodput"]["calls"] for w in rows) > summary["goodput"]["calls"] > 0  # warm-up and drain too
    pytest.importorskip("matplotlib")
    html = tmp_path / "r.html"
    res = CliRunner().invoke(main, ["report", str(windowed), "--html", str(html)])
    assert res.exit_code == 0, res.output
    page = html.read_text()
    section = page[page.index('<section id="windows">') :]
    section = section[: section.index("</section>")]
    assert "Goodput (--slo)" in section and "Goodput at the per-call SLO ttft&lt;=25ms" in section


def test_a_runs_windows_are_decoded_one_at_a_time(windowed: Path) -> None:
    """A decoded window takes megabytes (its histograms): the figures over time, the rebuild and a span decode one
    window at a time, so their peak memory does not grow with the run's windows (all of them at once made an
    eight-hour soak's summary take gigabytes)."""
    _, data = summarize_file(windowed)
    windows = [m for m in data.marks if m["type"] == "window"]
    win = steady_window(read_run(windowed))

    def peak(marks: list[dict]) -> int:
        run = dataclasses.replace(data, marks=marks)
        tracemalloc.start()
        try:
            series(run)
            rebuild(run, win)
            span(run, 0.0, float("inf"))
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    one, every = peak(windows[:1]), peak(windows)
    assert len(windows) >= 4 and every < 1.6 * one, (len(windows), one, every)
