"""--history live: recorded tool results bound to the live answer's tool-call ids, case by case."""

from __future__ import annotations

from replay.sessions.tool_ids import bind, rebound


def call(cid: str, name: str = "bash", args: str = "{}") -> dict:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


def test_live_calls_stand_for_the_recorded_ones_in_order():
    b = bind([call("r1"), call("r2", "read")], [call("live_a"), call("live_b", "grep", '{"q":1}')])
    assert [c["id"] for c in b.calls] == ["live_a", "live_b"]
    assert b.calls[1]["function"] == {"name": "grep", "arguments": '{"q":1}'}  # sent as the host made it
    assert b.ids == {"r1": "live_a", "r2": "live_b"}
    assert (b.bound, b.kept, b.dropped, b.renamed) == (2, 0, 0, 1)
    assert rebound({"role": "tool", "tool_call_id": "r2", "content": "x"}, b.ids)["tool_call_id"] == "live_b"
    user = {"role": "user", "content": "r2"}
    assert rebound(user, b.ids) is user


def test_no_live_call_keeps_the_recorded_ones():
    b = bind([call("r1")], None)
    assert b.calls == [call("r1")] and b.ids == {} and b.kept == 1


def test_fewer_and_more_live_calls():
    fewer = bind([call("r1"), call("r2")], [call("l1")])
    assert [c["id"] for c in fewer.calls] == ["l1", "r2"] and fewer.ids == {"r1": "l1"} and fewer.kept == 1
    more = bind([call("r1")], [call("l1"), call("l2")])
    assert [c["id"] for c in more.calls] == ["l1"] and more.dropped == 1
    none_recorded = bind(None, [call("l1")])
    assert none_recorded.calls is None and none_recorded.dropped == 1


def test_a_live_call_without_an_id_keeps_the_recorded_one():
    b = bind([call("r1")], [{"function": {"name": "bash", "arguments": "{}"}}])
    assert b.calls[0]["id"] == "r1" and b.ids == {}
