"""--history live: the live answer's calls in the context, the recorded tool results bound to them, case by case."""

from __future__ import annotations

import orjson

from replay.sessions.tool_ids import STAND_IN, bind, bound_messages, rebound
from replay.workload.tokens import get_tokenizer
from replay.workload.trajectory import MessageBuilder


def call(cid: str, name: str = "bash", args: str = "{}") -> dict:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


def test_live_calls_stand_for_the_recorded_ones_in_order():
    b = bind([call("r1"), call("r2", "read")], [call("live_a"), call("live_b", "grep", '{"q":1}')])
    assert [c["id"] for c in b.calls] == ["live_a", "live_b"]
    assert b.calls[1]["function"] == {"name": "grep", "arguments": '{"q":1}'}  # sent as the host made it
    assert b.ids == {"r1": "live_a", "r2": "live_b"} and b.renamed == 1 and not b.as_text and not b.unanswered
    assert rebound({"role": "tool", "tool_call_id": "r2", "content": "x"}, b.ids)["tool_call_id"] == "live_b"
    user = {"role": "user", "content": "r2"}
    assert rebound(user, b.ids) is user


def test_no_live_call_sends_the_recorded_results_as_text():
    b = bind([call("r1")], None)
    assert b.calls is None and b.ids == {} and b.as_text == {"r1"}


def test_fewer_and_more_live_calls():
    fewer = bind([call("r1"), call("r2")], [call("l1")])
    assert [c["id"] for c in fewer.calls] == ["l1"] and fewer.ids == {"r1": "l1"} and fewer.as_text == {"r2"}
    more = bind([call("r1")], [call("l1"), call("l2")])
    assert [c["id"] for c in more.calls] == ["l1", "l2"] and more.unanswered == ["l2"]
    none_recorded = bind(None, [call("l1")])
    assert none_recorded.calls[0]["id"] == "l1" and none_recorded.unanswered == ["l1"]


def test_the_next_turn_answers_exactly_the_live_calls():
    build = MessageBuilder(get_tokenizer())
    append = [build.message({"role": "tool", "tool_call_id": r, "content": f"result {r}"}) for r in ("r1", "r2")]
    append.append(build.message({"role": "user", "content": "go on"}))
    b = bind([call("r1"), call("r2")], [call("l1")])  # r2 has no live call: as text
    out = [orjson.loads(m.wire) for m in bound_messages(append, b, build)]
    assert out[0] == {"role": "tool", "tool_call_id": "l1", "content": "result r1"}
    assert out[1] == {"role": "user", "content": "<tool_result>\nresult r2\n</tool_result>"}
    assert out[2] == {"role": "user", "content": "go on"}
    more = bind([call("r1")], [call("l1"), call("l2")])
    out = [orjson.loads(m.wire) for m in bound_messages(append[:1], more, build)]
    assert out == [{"role": "tool", "tool_call_id": "l1", "content": "result r1"},
                   {"role": "tool", "tool_call_id": "l2", "content": STAND_IN}]  # fmt: skip
    same = bound_messages(append[:1], bind([call("r1")], [call("r1")]), build)
    assert same[0] is append[0]  # an id that did not change: the message as it was
