"""Every figure a summary can have is a threshold name, checked before a run against a summary with every key (the
sections an empty run leaves null, ``answers`` among them, in their whole shape); and a run whose forced output
length the host ignored passes only with a warning in its verdict."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from replay.cli import main
from replay.verdict.thresholds import ThresholdError, parse_all
from tests.support.hostile import PATHS, answer, streaming, threaded_host
from tests.support.trajectories import simple_turns, write_trajectory


def _figures(node: Any, path: tuple[str, ...] = ()) -> list[str]:
    """Every number's dotted path in a summary (lists aside: windows and segments are not named by a path)."""
    if isinstance(node, dict):
        return [f for k, v in node.items() for f in _figures(v, (*path, k))]
    if isinstance(node, int | float) and not isinstance(node, bool) and path[0] not in ("verdict", "run"):
        return [".".join(path)]
    return []


@pytest.fixture(scope="module")
def rich_summary(tmp_path_factory) -> dict:
    """A run with answers checked, tasks complete, tool calls, the truth log and retried faults."""
    tmp = tmp_path_factory.mktemp("names")
    work = tmp / "w.jsonl"
    for i in range(3):
        write_trajectory(work, f"w{i}", simple_turns(3, output_tokens=12))
    args = ["run", str(work), "--sim-profile", "fast", "-c", "3", "--tool-time", "none", "--sim-faults", "500:0.2",
            "--retries", "2", "--sim-truth-log", str(tmp / "truth.jsonl"), "--out", str(tmp / "run.jsonl"), "-q",
            "--json"]  # fmt: skip
    res = CliRunner().invoke(main, args)
    assert res.exit_code in (0, 2), res.output
    return orjson.loads(res.stdout)


def test_every_figure_of_a_run_is_a_threshold_name_before_the_run(rich_summary) -> None:
    names = _figures(rich_summary)
    assert {"answers.short_share", "answers.checked", "truth.ttft_dev_s.p95", "user_decode_tps.not_measured"} <= set(
        names
    )
    refused = []
    for name in names:
        try:
            parse_all([f"{name}>=0"], check_figures=True)
        except ThresholdError as exc:
            refused.append(str(exc))
    assert refused == []


def test_names_of_sections_an_empty_run_leaves_null_are_accepted_and_typos_refused() -> None:
    for expr in ("answers.short_share<=0%", "speculation.acceptance_length_mean>1.5", "server.ttft_s.p50<1s",
                 "errors_by_class.http_429<5", "tasks.projected_saving.2x>0.1"):  # fmt: skip
        parse_all([expr], check_figures=True)
    for expr in ("answers.short_shar<=0%", "ttft_p96<1s", "errors_by_class.http_429.n<1"):
        with pytest.raises(ThresholdError, match="has no figure"):
            parse_all([expr], check_figures=True)


def test_a_figure_the_run_left_null_fails_and_an_absent_error_class_counted_none() -> None:
    short, e429 = parse_all(["answers.short_share<=0%", "errors_by_class.http_429<1"])
    assert short.judge({"answers": None})["ok"] is False  # --no-check-answers: nothing unmeasured passes
    assert e429.judge({"errors_by_class": {}}) == {"expr": "errors_by_class.http_429<1", "ok": True, "value": 0,
                                                   "figure": "errors_by_class.http_429"}  # fmt: skip


def _against_a_host_that_ignores_ignore_eos(tmp_path, *extra: str):
    """Answers of 3 tokens, finish ``stop``, whatever was asked (8): vLLM's /v1/messages with ignore_eos dropped."""
    work = tmp_path / "w.jsonl"
    write_trajectory(work, "w", simple_turns(3, output_tokens=8))
    out = tmp_path / "run.jsonl"
    with threaded_host({PATHS["chat"]: streaming(answer("chat", tokens=3))}) as url:
        args = ["run", str(work), "--host", url, "--model", "m", "-c", "1", "--tool-time", "none",
                "--force-output-length", "--out", str(out), "-q", "--json", *extra]  # fmt: skip
        live = CliRunner().invoke(main, args)
    offline = CliRunner().invoke(main, ["report", str(out), "--json"])
    return live, orjson.loads(live.stdout), orjson.loads(offline.stdout), out


def test_an_ignored_forced_length_is_a_verdict_warning(tmp_path) -> None:
    live, s, again, out = _against_a_host_that_ignores_ignore_eos(tmp_path)
    assert live.exit_code == 0, live.output
    records = [r for line in out.read_bytes().splitlines() if (r := orjson.loads(line))["type"] == "request"]
    assert [r["answer_check"]["length"] for r in records] == ["stop"] * 3  # the records say why: the model stopped
    assert s["answers"]["forced"] is False and s["answers"]["length_short"] == 3
    assert s["verdict"] == again["verdict"]
    assert s["verdict"]["passed"] is True
    assert s["verdict"]["warnings"] == ["--force-output-length was not honoured: 3 of 3 answers were not the length "
                                        "asked (stop 3); the load is not the one the run claims"]  # fmt: skip
    text = CliRunner().invoke(main, ["report", str(out)]).output
    assert "WARNING: --force-output-length was not honoured" in text


def test_the_answer_checks_gate_a_run(tmp_path) -> None:
    live, s, again, _ = _against_a_host_that_ignores_ignore_eos(tmp_path, "--threshold", "answers.short_share<=0%")
    assert live.exit_code == 2, live.output  # accepted before the run, breached after it
    assert s["thresholds"] == again["thresholds"] == [{"expr": "answers.short_share<=0%", "ok": False, "value": 1.0,
                                                       "figure": "answers.short_share"}]  # fmt: skip


def test_force_output_lengths_help_names_the_hosts_that_ignore_it() -> None:
    out = " ".join(CliRunner().invoke(main, ["run", "--help"]).output.split())
    assert "Ignored by vLLM's /v1/messages" in out
