"""A host's usage that contradicts its own stream is a fault (``bad_usage``), never a success: 8 token events are not
1 output token. A host may put several tokens in one event (speculative decoding, a gateway's batching), so only
fewer tokens than events contradicts; and a later usage object with timings alone (Groq's ``x_groq.usage``) takes
no counts away."""

from __future__ import annotations

import orjson
import pytest
from click.testing import CliRunner

from replay.cli import main
from replay.clients.client import FLAVOURS
from replay.clients.flavours.base import RequestOptions
from replay.clients.stream import interpret
from tests.support.hostile import PATHS, answer, sse, streaming, threaded_host
from tests.support.trajectories import simple_turns, write_trajectory

APIS = sorted(FLAVOURS)
OUTPUT = {"chat": "completion_tokens", "completions": "completion_tokens", "responses": "output_tokens",
          "anthropic": "output_tokens"}  # fmt: skip


def _read(api: str, parts: list[bytes]):
    flavour = FLAVOURS[api](RequestOptions(model="m"))
    st = interpret(flavour, parts, [float(i + 1) for i in range(len(parts))], 0.0)
    return st, flavour.outcome(st, b"")


@pytest.mark.parametrize("api", APIS)
def test_fewer_output_tokens_than_token_events_is_bad_usage(api) -> None:
    st, failed = _read(api, answer(api, tokens=8, usage={OUTPUT[api]: 1}))
    assert st.events == 8
    assert failed is not None and failed[0] == "bad_usage", failed
    assert "output = 1" in failed[1] and "8 token events" in failed[1]
    assert st.usage.output is None and st.usage.prompt is None and st.usage.raw  # no count of it enters a sum


@pytest.mark.parametrize("api", APIS)
def test_several_tokens_an_event_and_exact_counts_are_believed(api) -> None:
    for tokens in (8, 40):  # one token an event, or five (a speculating host, a batching gateway)
        st, failed = _read(api, answer(api, tokens=8, usage={OUTPUT[api]: tokens}))
        assert failed is None and st.usage.output == tokens


def test_a_later_usage_with_timings_alone_keeps_the_counts() -> None:
    """Groq: the counts in ``usage`` and, in a later chunk, ``x_groq.usage`` with its timings but no counts."""
    times = {"queue_time": 0.01, "prompt_time": 0.002, "completion_time": 0.05, "total_time": 0.052}
    counts = {"prompt_tokens": 10, "completion_tokens": 3, "prompt_tokens_details": {"cached_tokens": 4}}
    tokens = [sse({"id": "c", "choices": [{"index": 0, "delta": {"content": f"t{i}"}}]}) for i in range(3)]
    finish = sse({"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": counts})
    groq = sse({"id": "c", "choices": [], "x_groq": {"id": "req_1", "usage": times}})
    parts = [*tokens, finish, groq, b"data: [DONE]\n\n"]
    st, failed = _read("chat", parts)
    assert failed is None
    assert (st.usage.prompt, st.usage.cached, st.usage.output) == (10, 4, 3)
    assert st.timings == times


def test_a_run_counts_contradicting_usage_as_invalid_and_none_of_its_tokens(tmp_path) -> None:
    work = tmp_path / "w.jsonl"
    write_trajectory(work, "w", simple_turns(3, output_tokens=8))
    out = tmp_path / "run.jsonl"
    with threaded_host({PATHS["chat"]: streaming(answer("chat", tokens=8, usage={"completion_tokens": 1}))}) as url:
        live = CliRunner().invoke(main, ["run", str(work), "--host", url, "--model", "m", "-c", "1", "--retries", "0",
                                         "--tool-time", "none", "--out", str(out), "-q", "--json"])  # fmt: skip
    offline = CliRunner().invoke(main, ["report", str(out), "--json"])
    s, again = orjson.loads(live.stdout), orjson.loads(offline.stdout)
    assert live.exit_code == 2, live.output  # every call failed: the default verdict's error rate
    records = [r for line in out.read_bytes().splitlines() if (r := orjson.loads(line))["type"] == "request"]
    assert [(r["error"], r["output_tokens"], r["output_events"]) for r in records] == [("bad_usage", None, 8)] * 3
    assert all('"completion_tokens":1' in r["usage_raw"] for r in records)
    assert s["errors_by_class"] == again["errors_by_class"] == {"bad_usage": 3}
    assert s["invalid_usage"] == again["invalid_usage"] == 3
    assert s["totals"]["output_tokens"] == again["totals"]["output_tokens"] == 0
