"""The answer checks: the asked length and why not, tool calls against their schema, empty and degenerate text."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from replay.clients.answer_check import (
    MAX_PERIOD,
    MIN_RUN,
    ToolCall,
    answer_check,
    degenerate,
    length_check,
    tool_calls_check,
)

BASH = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "parameters": {
                "type": "object",
                "properties": {"cmd": {"type": "string"}, "timeout": {"type": ["integer", "null"]}},
                "required": ["cmd"],
            },
        },
    }
]


def brute_degenerate(text: str) -> bool:
    """The definition itself: some period p <= MAX_PERIOD with a stretch where each character equals the one p
    later, long enough that the stretch and its repeat cover MIN_RUN characters."""
    for p in range(1, MAX_PERIOD + 1):
        run = 0
        for i in range(len(text) - p):
            run = run + 1 if text[i] == text[i + p] else 0
            if run + p >= MIN_RUN:
                return True
    return False


def test_length_says_why_an_answer_is_short() -> None:
    assert length_check(48, 48, "length") == "ok"
    assert length_check(48, 12, "stop") == "stop"  # the model ended it: ignore_eos was not honoured
    assert length_check(200, 171, "length") == "lowered"  # vLLM lowered max_tokens to fit its context
    assert length_check(200, 171, "max_tokens") == "lowered"  # the same through /v1/messages
    assert length_check(48, 30, "tool_calls") == "short"
    assert length_check(48, 49, "length") == "over"
    assert length_check(48, None, "stop") is None


def test_tool_calls_are_checked_against_the_declared_schema() -> None:
    assert tool_calls_check([], BASH) is None
    assert tool_calls_check([ToolCall("bash", '{"cmd": "ls", "timeout": null}')], BASH) == "ok"
    assert tool_calls_check([ToolCall("bash", '{"cmd": "ls"')], BASH) == "invalid_json"
    assert tool_calls_check([ToolCall("bash", '["ls"]')], BASH) == "invalid_json"
    assert tool_calls_check([ToolCall("rm", '{"cmd": "ls"}')], BASH) == "unknown_tool"
    assert tool_calls_check([ToolCall("bash", '{"timeout": 3}')], BASH) == "schema"
    assert tool_calls_check([ToolCall("bash", '{"cmd": true}')], BASH) == "schema"
    assert tool_calls_check([ToolCall("bash", '{"cmd": "ls", "timeout": true}')], BASH) == "schema"
    assert tool_calls_check([ToolCall("anything", '{"x": 1}')], None) == "ok"  # nothing declared: JSON only


def test_answer_check_reads_the_text_only_when_it_has_it() -> None:
    assert answer_check(48, 48, "length", None, [], None, answered=True) == {
        "length": "ok", "tool_calls": None, "degenerate": None, "empty": False}  # fmt: skip
    assert answer_check(48, 2, "length", None, [], None, answered=False)["empty"] is True
    assert answer_check(48, 48, "length", " \n", [], None, answered=True)["empty"] is True
    assert answer_check(48, 48, "tool_calls", "", [ToolCall("bash", '{"cmd":"ls"}')], BASH, True)["empty"] is False
    assert answer_check(400, 400, "length", "ab" * 200, [], None, answered=True)["degenerate"] is True


def test_degenerate_finds_loops_and_passes_ordinary_text() -> None:
    rng = random.Random(7)
    words = ["def", "return", "self", "value", "import", "path", "the", "of", "and", "to", "in", "for", "if", "else"]
    prose = " ".join(rng.choice(words) for _ in range(600))
    assert not degenerate(prose)
    assert degenerate(prose[:500] + "I will now run the tests. " * 13 + prose[:300])
    assert degenerate("x" * MIN_RUN) and not degenerate("x" * (MIN_RUN - 1))
    assert not degenerate("")


@settings(max_examples=300, deadline=None)
@given(
    st.text(alphabet="abcd xy", max_size=400),
    st.text(alphabet="abcde", min_size=1, max_size=MAX_PERIOD + 20),
    st.integers(0, 8),
    st.integers(0, 400),
)
def test_degenerate_agrees_with_its_definition(noise: str, unit: str, times: int, at: int) -> None:
    text = noise[:at] + unit * times + noise[at:]
    assert degenerate(text) == brute_degenerate(text)
