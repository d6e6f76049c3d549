"""``--responses-state previous`` against vLLM: vLLM leaves the system message out of the calls it continues, so the
run says so, on the terminal as it starts and in every report of its run file; not against other hosts, nor
against the simulated host in vLLM's dialect (which keeps the whole context)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from replay.cli import main
from replay.metrics.summary import summarize
from replay.records.reader import read_run
from replay.reports.html_report import meta_lines
from replay.reports.report_input import RunReport
from tests.support.hostile import PATHS, answer, streaming, threaded_host
from tests.support.trajectories import simple_turns, write_trajectory

SAID = "--responses-state previous against vLLM: vLLM leaves the system message out"


def _run(tmp_path: Path, name: str, *host: str) -> tuple[str, str]:
    """(what the run printed on stderr, its text report and its HTML page's head lines, as one text)."""
    work = tmp_path / "w.jsonl"
    if not work.exists():
        write_trajectory(work, "w0", simple_turns(3, output_tokens=3))
    out = tmp_path / f"{name}.jsonl"
    res = CliRunner().invoke(main, ["run", str(work), *host, "--api", "responses", "--responses-state", "previous",
                                    "--tool-time", "none", "--out", str(out), "-q"])  # fmt: skip
    assert res.exit_code == 0, res.output
    page = meta_lines(RunReport(run=read_run(out), summary=summarize(read_run(out)).to_dict()))
    return res.stderr, CliRunner().invoke(main, ["report", str(out)]).output + "\n".join(page)


def test_chained_calls_against_vllm_are_said_to_lose_the_system_message(tmp_path: Path) -> None:
    with threaded_host({PATHS["responses"]: streaming(answer("responses"))}) as url:
        vllm_err, vllm_report = _run(tmp_path, "vllm", "--host", url, "--model", "m", "--dialect", "vllm")
        other_err, other_report = _run(tmp_path, "other", "--host", url, "--model", "m")
    assert SAID in vllm_err and " ".join(vllm_report.split()).count(SAID) == 2  # the text report and the page
    assert max(len(line) for line in vllm_report.splitlines()[:6]) <= 100
    assert SAID not in other_err and SAID not in " ".join(other_report.split())
    sim_err, sim_report = _run(tmp_path, "sim", "--sim-dialect", "vllm", "--sim-profile", "instant")
    assert SAID not in sim_err and SAID not in " ".join(sim_report.split())
