"""The per-task tag is spliced into the first user message's bytes: the same message as rendering it again, with
its own tokens added, and no decoding or re-counting of the message."""

from __future__ import annotations

import orjson

from replay.sessions.agent import _salted
from replay.workload.history import HistoryPolicy
from replay.workload.tokens import get_tokenizer
from replay.workload.trajectory import MessageBuilder


def _builder() -> MessageBuilder:
    return MessageBuilder(get_tokenizer(), HistoryPolicy())


def test_the_tag_goes_into_the_first_user_message_with_string_content() -> None:
    b = _builder()
    content = 'fix the "bug" in\nmain.py ' * 500
    msgs = [b.message({"role": "system", "content": "sys"}),
            b.message({"role": "user", "content": [{"type": "text", "text": "parts"}]}),
            b.message({"role": "user", "name": 'x"content":"y', "content": content})]  # fmt: skip
    tag = "[replay abc task 3]\n"
    out = _salted(msgs, tag, b)
    assert out[0] is msgs[0] and out[1] is msgs[1]  # the system prompt stays shared; parts are left alone
    again = b.message({"role": "user", "name": 'x"content":"y', "content": tag + content})
    assert orjson.loads(out[2].wire) == orjson.loads(again.wire) and out[2].wire == again.wire
    assert out[2].tokens == msgs[2].tokens + len(b.tokenizer.encode(tag))
    assert abs(out[2].tokens - again.tokens) <= 2  # counted apart, the boundary may merge a token or two


def test_a_message_whose_content_is_not_a_string_is_not_tagged() -> None:
    b = _builder()
    msgs = [b.message({"role": "user", "content": [{"type": "text", "text": "only parts"}]})]
    assert _salted(msgs, "[t]\n", b)[0] is msgs[0]


def test_the_system_prompt_gets_the_runs_tag() -> None:
    b = _builder()
    msgs = [b.message({"role": "system", "content": "You are careful."}), b.message({"role": "user", "content": "go"})]
    out = _salted(msgs, "[replay abc]\n", b, role="system")
    assert orjson.loads(out[0].wire)["content"] == "[replay abc]\nYou are careful." and out[0].role == "system"
    assert out[1] is msgs[1]
