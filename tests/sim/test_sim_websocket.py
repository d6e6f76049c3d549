"""Responses over a WebSocket (``--transport websocket``) against the simulated host: 32 sessions, every call
answered, token totals equal to the truth log, each token read after the host wrote it; the same records as over
HTTP; a socket the host dropped (a ``drop`` fault) or closed at its connection limit is replaced and counted."""

from __future__ import annotations

import itertools
from collections import defaultdict

import numpy as np
import orjson
import pytest
from click.testing import CliRunner

from replay.cli import main
from replay.loops.closed_loop import LoadConfig
from replay.metrics.truth_compare import client_token_times, compare, host_token_times, load_truth
from replay.records.reader import read_run
from replay.reports.html_report import meta_lines
from replay.reports.report_input import RunReport
from replay.reports.text_report import to_text
from replay.runner.embedded_host import embedded_host
from replay.runner.single_run import RunSpec, execute
from replay.sessions.tool_time import ToolTimePolicy
from tests.support.sim_process import sim_process
from tests.support.trajectories import simple_turns, write_trajectory

ROUNDING_S = 2e-6  # both sides store times rounded to the microsecond
SESSIONS, TURNS = 32, 3


def _workload(path, sessions: int, turns: int, tool_time_s: float = 0.0):
    for i in range(sessions):  # answers of different lengths, so calls do not all end in one engine step
        write_trajectory(path, f"w{i}", simple_turns(turns, output_tokens=8 + (i * 5) % 23, tool_time_s=tool_time_s))
    return path


def _spec(work, url, out, transport, sessions, **kw):
    load = LoadConfig(concurrency=sessions, tool_time=ToolTimePolicy.parse(kw.pop("tool_time", "none")))
    return RunSpec(trajectories=[str(work)], host=url, model="m", api="responses", transport=transport,
                   responses_state="previous", load=load, out=str(out), progress=False, **kw)  # fmt: skip


@pytest.fixture(scope="module")
def ws32(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ws32")
    work = _workload(tmp / "w.jsonl", SESSIONS, TURNS)
    runs = {}
    for transport in ("websocket", "http"):
        truth_path = tmp / f"truth-{transport}.jsonl"
        with embedded_host("fast", str(truth_path)) as sim:
            result = execute(_spec(work, sim.base_url, tmp / f"{transport}.jsonl", transport, SESSIONS))
        runs[transport] = (read_run(result.path), load_truth(truth_path), result.summary)
    return runs


def test_32_sessions_over_websocket_every_call_answered_and_counted_as_the_host_did(ws32):
    run, truth, summary = ws32["websocket"]
    n = SESSIONS * TURNS
    assert len(run.requests) == n and all(r.error is None and r.status == 200 for r in run.requests)
    assert run.header["host"]["transport"] == "websocket"
    served = [t for t in truth.values() if t["status"] == "ok"]
    assert len(served) == n and all(t["transport"] == "websocket" for t in served)
    # token totals: the client's usage equals what the host served, call by call and in sum
    assert sum(r.output_tokens for r in run.requests) == sum(t["output_tokens"] for t in served)
    assert sum(r.prompt_tokens for r in run.requests) == sum(t["prompt_tokens"] for t in served)
    cmp = compare(run.requests, truth)
    assert cmp["matched"] == cmp["aligned"] == cmp["ok_matched"] == n
    assert cmp["output_tokens_equal"] == cmp["cached_tokens_equal"] == n
    # every turn after a session's first continued the socket's own last response (only the new items sent)
    assert sum(t["continued"] for t in served) == n - SESSIONS
    assert all(truth[r.id]["continued"] == (r.turn > 0) for r in run.requests)
    # one socket per session, opened before the run: no call paid for a handshake, none reconnected
    assert summary["connections"]["new"] == 0 and summary["connections"]["reconnects"] == 0


def test_websocket_stamps_are_causal_against_the_truth(ws32):
    """As the HTTP truth test checks it: on one monotonic clock, each request was sent before the host saw it and
    each token read after the host wrote it; some token was read before the host wrote the next (read as they come,
    not once the answer was whole)."""
    run, truth, _ = ws32["websocket"]
    streamed = 0
    for rec in run.requests:
        t = truth[rec.id]
        client, host = client_token_times(rec), host_token_times(t)
        assert len(client) == len(host) and bool(np.all(client >= host - ROUNDING_S)), (rec.id, client - host)
        assert rec.t_call <= rec.t_sent <= t["arrival"] + ROUNDING_S
        assert rec.t_first_token >= t["first_token"] - ROUNDING_S
        streamed += int(np.count_nonzero(client[:-1] < host[1:]))
    assert streamed > 0


def test_the_same_records_and_figures_as_over_http(ws32):
    ws_run, _, ws_summary = ws32["websocket"]
    http_run, _, http_summary = ws32["http"]

    def by_turn(run):
        return {(r.trajectory, r.turn): r for r in run.requests}

    ws, http = by_turn(ws_run), by_turn(http_run)
    assert ws.keys() == http.keys()
    for key, a in ws.items():
        b = http[key]
        assert (a.output_tokens, a.output_events, a.finish_reason, a.max_tokens) == (
            b.output_tokens,
            b.output_events,
            b.finish_reason,
            b.max_tokens,
        ), key
        assert a.served["id"].startswith("resp_") and b.served["id"].startswith("resp_")
        # the host counted the same prompt beside the client's estimate (each run tags its prompts its own way)
        assert a.prompt_tokens - a.prompt_tokens_est == b.prompt_tokens - b.prompt_tokens_est, key
    for key in ("requests", "errors"):
        assert ws_summary[key] == http_summary[key]
    for key in ("requests", "ok", "output_tokens"):
        assert ws_summary["totals"][key] == http_summary["totals"][key], key


def test_a_socket_the_host_dropped_mid_answer_is_replaced_and_counted(tmp_path):
    work = _workload(tmp_path / "w.jsonl", 6, 6)
    truth_path = tmp_path / "truth.jsonl"
    with embedded_host("fast", str(truth_path), faults="drop:0.2", fault_seed=3) as sim:
        result = execute(_spec(work, sim.base_url, tmp_path / "r.jsonl", "websocket", 6, retries=0))
    run, truth = read_run(result.path), load_truth(truth_path)
    dropped = {t["request_id"] for t in truth.values() if t["fault"] == "drop"}
    failed = {r.id: r.error for r in run.requests if r.error is not None}
    assert dropped and failed == dict.fromkeys(dropped, "disconnect")  # each drop, and only a drop, failed the call
    by_lane = defaultdict(list)
    for r in run.requests:
        by_lane[r.session].append(r)
    replaced = 0
    for calls in by_lane.values():
        calls.sort(key=lambda r: r.t_sent)
        for before, after in itertools.pairwise(calls):
            # the call after a drop opened a new socket in place of the dropped one, and only such a call did
            assert (after.reconnect is not None) == (before.error == "disconnect"), (before.error, after.reconnect)
            if after.reconnect is not None:
                replaced += 1
                assert after.connect_s is not None  # (it may be dropped in turn: the faults are drawn per call)
    assert replaced >= 1
    summary = orjson.loads(CliRunner().invoke(main, ["report", str(result.path), "--json"]).stdout)
    # the summary counts the replacements among the calls of its window (a call after the window is left out), each
    # of which opened a socket (a lane whose warm-up socket was late opens its first one too)
    assert 0 < summary["connections"]["reconnects"] <= replaced
    assert summary["connections"]["reconnects"] <= summary["connections"]["new"]


def test_the_connection_limit_is_met_by_a_new_socket_and_counted(tmp_path):
    """The host closes a socket older than its limit at the next turn (websocket_connection_limit_reached): the turn
    goes again, in full, on a new socket. A session's pause (0.6 s) outlasts the limit (0.3 s), so every turn after a
    session's first meets it, however busy the machine (a pause is never shorter than asked)."""
    sessions, turns = 4, 3
    work = _workload(tmp_path / "w.jsonl", sessions, turns, tool_time_s=0.6)
    truth_path = tmp_path / "truth.jsonl"
    with sim_process("--profile", "fast", "--ws-limit", "0.3", "--truth-log", str(truth_path)) as (url, _):
        spec = _spec(work, url, tmp_path / "r.jsonl", "websocket", sessions, tool_time="recorded")
        result = execute(spec)
    run, truth = read_run(result.path), load_truth(truth_path)
    assert len(run.requests) == sessions * turns and all(r.error is None for r in run.requests)
    limited = [r for r in run.requests if r.reconnect == "websocket_connection_limit_reached"]
    assert {(r.trajectory, r.turn) for r in limited} >= {(f"w{i}", t) for i in range(sessions) for t in (1, 2)}
    for r in limited:
        assert r.retries >= 1 and r.connect_s is not None
        assert any("websocket_connection_limit_reached" in n for n in r.notes or [])
        assert truth[r.id]["continued"] is False  # the new socket holds nothing: the whole context was sent
    assert result.summary["connections"]["reconnects"] == len([r for r in run.requests if r.reconnect])


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["run", "--transport", "websocket"], "--transport websocket does nothing here"),  # --api chat
        (["sweep", "-c", "1", "--transport", "websocket", "--virtual"], "--transport does nothing"),
        (
            ["run", "--transport", "websocket", "--api", "responses", "--connection", "per-request"],
            "--connection per-request does nothing with --transport websocket",
        ),
    ],
)
def test_websocket_is_refused_where_it_does_nothing(tmp_path, args, said):
    work = write_trajectory(tmp_path / "w.jsonl", "t", simple_turns(1))
    res = CliRunner().invoke(main, [args[0], str(work), "-q", "--out", str(tmp_path / "r.jsonl"), *args[1:]])
    assert res.exit_code == 1 and said in res.output, res.output


def test_the_report_header_says_which_transport_carried_the_calls(ws32):
    for transport, said in (("websocket", True), ("http", False)):
        run, _, summary = ws32[transport]
        head = to_text(summary, run.header).splitlines()[0]
        assert ("(responses over WebSocket)" in head) is said and "(responses" in head, head
        meta = meta_lines(RunReport(run=run, summary=summary.to_dict()))[0]  # the HTML page's, the same words
        assert ("(responses over WebSocket)" in meta) is said and "(responses" in meta, meta
