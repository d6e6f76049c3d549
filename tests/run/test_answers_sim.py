"""Answers checked, not only timed, against the simulated host: a known share of corrupted answers is found, a
forced length is called forced only when it held, and two hosts' answers are compared call by call.

Every figure three ways: the live summary equals ``replay report --json`` of the run file, a recount here from the
raw JSON lines, and the simulated host's truth log (which requests it corrupted)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from replay.cli import main
from replay.reports.html_answers import answers
from replay.reports.report_input import RunReport
from tests.support.trajectories import simple_turns, write_trajectory


def workload(path: Path, n: int = 8, turns: int = 8, output_tokens: int = 120) -> Path:
    for i in range(n):
        write_trajectory(path, f"a{i}", simple_turns(turns, output_tokens=output_tokens))
    return path


def lines(path: Path, kind: str) -> list[dict[str, Any]]:
    return [r for line in path.read_text().splitlines() if (r := json.loads(line))["type"] == kind]


def cli(args: list[str]) -> dict[str, Any]:
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_a_corrupted_share_of_answers_is_found(tmp_path: Path) -> None:
    out, truth = tmp_path / "run.jsonl", tmp_path / "truth.jsonl"
    live = cli(["run", str(workload(tmp_path / "w.jsonl")), "-c", "4", "--sim-profile", "instant", "--sim-faults",
                "repeat:0.2", "--sim-truth-log", str(truth), "--check-answers", "--out", str(out), "-q",
                "--json"])  # fmt: skip
    offline = cli(["report", str(out), "--json"])
    assert live["answers"] == offline["answers"]
    requests = lines(out, "request")
    truths = [json.loads(line) for line in truth.read_text().splitlines()]
    corrupted = {t["request_id"] for t in truths if t.get("fault") == "repeat"}
    injected = len(corrupted) / len(truths)
    flagged = {r["id"] for r in requests if r["answer_check"]["degenerate"]}
    a = live["answers"]
    print(f"\nrepeat:0.2 -> {len(corrupted)} of {len(truths)} answers corrupted ({injected:.1%}); "
          f"degenerate_share {a['degenerate_share']:.1%}")  # fmt: skip
    assert 0.05 < injected < 0.35  # 64 draws at 0.2
    assert flagged == corrupted  # every corrupted answer found, and only those
    assert a["degenerate_share"] == pytest.approx(len(flagged) / len(requests), abs=1e-12)
    assert abs(a["degenerate_share"] - injected) <= 0.01
    assert a["text_checked"] == len(requests) and a["short_share"] == 0.0 and a["empty_share"] == 0.0


def test_answers_stopping_early_are_short_and_a_forced_length_says_whether_it_held(tmp_path: Path) -> None:
    """A host whose model ends answers itself (natural_output_tokens) serves less than asked unless told not to:
    those answers are short (``stop``), and ``answers.forced`` is true only with --force-output-length, where every
    answer is as long as asked."""
    work = workload(tmp_path / "w.jsonl", n=4, turns=4, output_tokens=200)
    profile = tmp_path / "eos.toml"
    profile.write_text('base = "instant"\nnatural_output_tokens = 100\n')  # answers end after 100 tokens on average
    host = ["--sim-profile-file", str(profile)]
    free = cli(["run", str(work), "-c", "4", *host, "--out", str(tmp_path / "a.jsonl"), "-q", "--json"])
    requests = lines(tmp_path / "a.jsonl", "request")
    stopped = [r for r in requests if r["length_served"] < r["length_asked"]]
    assert stopped and all(r["answer_check"]["length"] == "stop" for r in stopped)
    assert free["answers"]["length_short"] == len(stopped) == free["answers"]["short_by_reason"]["stop"]
    assert free["answers"]["forced"] is None and free["answers"]["degenerate_share"] is None  # text not read
    forced = cli(["run", str(work), "-c", "4", *host, "--force-output-length", "--out", str(tmp_path / "b.jsonl"),
                  "-q", "--json"])  # fmt: skip
    assert forced["answers"]["length_short"] == 0 and forced["answers"]["forced"] is True
    assert cli(["report", str(tmp_path / "b.jsonl"), "--json"])["answers"] == forced["answers"]


def test_two_hosts_answers_are_compared_call_by_call(tmp_path: Path) -> None:
    """Two simulated hosts answer identical prompts identically (the same text for the same request); the
    comparison says so, and ``replay report`` of its index says the same."""
    out = tmp_path / "run.jsonl"
    doc = cli(["run", str(workload(tmp_path / "w.jsonl", n=3, turns=4, output_tokens=30)), "--host", "sim:fast",
               "--host", "sim:instant", "-c", "3", "--out", str(out), "-q", "--json"])  # fmt: skip
    (cmp,) = doc["comparisons"]
    runs = [tmp_path / f"run.{n}.jsonl" for n in ("1-sim-fast", "2-sim-instant")]
    a, b = (lines(p, "request") for p in runs)
    assert all(r["answer_text"] for r in a + b)
    assert {r["answer_text"] for r in a} == {r["answer_text"] for r in b}
    salts = {lines(p, "footer")[0]["salt"] for p in runs}
    assert len(salts) == 1  # one nonce for both hosts: identical prompts
    assert cmp["agreement"] == {"pairs": len(a), "answered_a": len(a), "answered_b": len(b), "exact_share": 1.0,
                                "first_divergence_mean": None, "differing": 0}  # fmt: skip
    rebuilt = cli(["report", str(tmp_path / "run.compare.json"), "--json"])
    assert rebuilt["comparisons"][0]["agreement"] == cmp["agreement"]


def test_answers_that_differ_are_counted_with_where_they_differ(tmp_path: Path) -> None:
    """One host corrupts a share of its answers (``repeat``: the first token again and again): the agreement is the
    share it left alone, and every corrupted answer first differs at its second token."""
    from replay.loops.closed_loop import LoadConfig
    from replay.metrics.agreement import agreement
    from replay.records.reader import read_run
    from replay.runner.single_run import RunSpec, execute
    from replay.sessions.tool_time import ToolTimePolicy
    from replay.studies.compare import compare_runs, side_from_file

    work = workload(tmp_path / "w.jsonl", n=6, turns=6, output_tokens=40)
    paths = []
    for i, faults in enumerate((None, "repeat:0.3")):
        load = LoadConfig(concurrency=3, tool_time=ToolTimePolicy.parse("none"), salt_nonce="samesalt01")
        spec = RunSpec(trajectories=[str(work)], sim_profile="instant", sim_faults=faults, keep_answers=True,
                       out=str(tmp_path / f"{i}.jsonl"), progress=False, load=load)  # fmt: skip
        paths.append(execute(spec).path)
    clean, faulty = (lines(Path(p), "request") for p in paths)
    corrupted = sum(r["answer_text"].strip() == " ".join(["the"] * 40) for r in faulty)
    ag = compare_runs(side_from_file(paths[0]), side_from_file(paths[1]))["agreement"]
    print(f"\nagreement with one host corrupting {corrupted} of {len(faulty)} answers: {ag}")
    assert 0 < corrupted < len(faulty) and ag["pairs"] == len(clean) == len(faulty)
    assert ag["exact_share"] == pytest.approx(1 - corrupted / len(faulty), abs=1e-12)
    assert ag["differing"] == corrupted and ag["first_divergence_mean"] == 1.0  # " the" agreed, then " the" ≠ " of"
    assert agreement(read_run(paths[0]).requests, read_run(paths[1]).requests) == ag


def test_the_html_report_has_the_answer_checks_the_text_report_has(tmp_path: Path) -> None:
    """The page's Answers section: the same figures as the text report's block, counted here from the raw records,
    and its warning when a forced length was not honoured."""
    pytest.importorskip("matplotlib")
    work = workload(tmp_path / "w.jsonl", n=4, turns=4, output_tokens=200)
    profile = tmp_path / "eos.toml"
    profile.write_text('base = "instant"\nnatural_output_tokens = 100\n')  # answers end after 100 tokens on average
    out, page = tmp_path / "a.jsonl", tmp_path / "a.html"
    cli(["run", str(work), "-c", "4", "--sim-profile-file", str(profile), "--out", str(out), "-q", "--json"])
    res = CliRunner().invoke(main, ["report", str(out), "--html", str(page)])
    assert res.exit_code == 0, res.output
    requests = [r for r in lines(out, "request") if r["error"] is None]
    short = sum(r["answer_check"]["length"] == "stop" for r in requests)
    assert 0 < short < len(requests)
    html = page.read_text()
    assert '<section id="answers"><h2>Answers</h2>' in html and 'href="#answers"' in html
    section = html.split('<section id="answers">')[1].split("</section>")[0]
    assert f'<td>calls checked</td><td class="n">{len(requests):,}</td>' in section
    assert f"{100 * short / len(requests):.1f}% ({short} of {len(requests)}: stop {short})" in section
    assert "not checked (--check-answers)" in section and "was not honoured" not in section
    said = CliRunner().invoke(main, ["report", str(out)]).output  # the text report's block, the same figures
    assert f"shorter than asked {100 * short / len(requests):.1f}% ({short} of {len(requests)}: stop {short})" in said


def test_the_html_answers_warn_when_a_forced_length_was_not_honoured() -> None:
    a = {"checked": 4, "short_share": 0.25, "tool_call_invalid_share": None, "degenerate_share": None,
         "empty_share": 0.0, "length_short": 1, "length_checked": 4, "short_by_reason": {"stop": 1, "lowered": 0},
         "tool_calls_made": 0, "text_checked": 0, "forced": False}  # fmt: skip
    section = answers(RunReport(run=None, summary={"answers": a}))  # type: ignore[arg-type]
    assert section is not None and "--force-output-length was not honoured: 1 of 4 answers" in section.body
    assert answers(RunReport(run=None, summary={"answers": None})) is None  # type: ignore[arg-type]
