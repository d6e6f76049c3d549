"""Prompt token ids: the size formula the client side estimates, role framing, one tokenisation per message."""

import base64
import struct

import numpy as np
import pytest

from replay.clients.flavours.completions import message_text
from replay.sim.core.prompt import REPLY_PRIMING, PromptTokenizer, message_token_ids
from replay.workload.tokens import MESSAGE_OVERHEAD_TOKENS, REPLY_PRIMING_TOKENS, get_tokenizer

TOOL_CALL = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"cmd": "ls -la"}'}}
# An 8×8 PNG's header: OpenAI's estimate (one 512-pixel tile) is 85 + 170 = 255 tokens, as the client counts it.
PNG = (
    "data:image/png;base64,"
    + base64.b64encode(
        b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + struct.pack(">II", 8, 8) + b"\x08\x00"
    ).decode()
)
IMAGE_TOKENS = 85 + 170
MESSAGES = [
    {"role": "system", "content": "You are a coding agent."},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "Fix the b"},
            {"type": "image_url", "image_url": {"url": PNG}},
            {"type": "text", "text": "ug"},
        ],
    },
    {"role": "assistant", "content": None, "tool_calls": [TOOL_CALL]},
    {"role": "tool", "tool_call_id": "c1", "content": "parser.py\nlexer.py\n"},
    {"role": "assistant", "content": "Looking.", "tool_calls": [TOOL_CALL, TOOL_CALL]},
]


class CountingTokenizer:
    """The real tokenizer, counting what it is asked to encode."""

    name = "counting"

    def __init__(self) -> None:
        self.calls: list[str] = []

    def encode(self, text: str) -> list[int]:
        self.calls.append(text)
        return get_tokenizer().encode(text)


def expected_prompt_tokens(messages: list[dict]) -> int:
    enc = get_tokenizer().encode
    total = REPLY_PRIMING_TOKENS
    for m in messages:
        content = m.get("content")
        if isinstance(content, list):
            total += IMAGE_TOKENS * sum(1 for p in content if p.get("type") == "image_url")
            content = "".join(p["text"] for p in content if p.get("type") == "text")
        total += len(enc(content or "")) + MESSAGE_OVERHEAD_TOKENS
        total += sum(len(enc(c["function"]["name"] + c["function"]["arguments"])) for c in m.get("tool_calls", ()))
    return total


async def test_prompt_size_is_the_client_formula():
    ids = await PromptTokenizer().prompt_ids(MESSAGES)
    assert ids.dtype == np.int32
    assert len(ids) == expected_prompt_tokens(MESSAGES)
    again = await PromptTokenizer().prompt_ids([MESSAGES[1]])
    skip = len(message_token_ids(MESSAGES[0], get_tokenizer()))
    assert (again[:-3] == ids[skip : skip + len(again) - 3]).all()  # an image is the same ids wherever it is sent
    with pytest.raises(ValueError, match="needs a 'url'"):
        await PromptTokenizer().prompt_ids([{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}])


async def test_each_distinct_message_is_tokenised_once():
    counting = CountingTokenizer()
    prompts = PromptTokenizer(counting)
    first = await prompts.prompt_ids(MESSAGES[:2])
    n_calls = len(counting.calls)
    second = await prompts.prompt_ids([*MESSAGES[:2], {"role": "assistant", "content": "ok"}, MESSAGES[1]])
    assert counting.calls[n_calls:] == ["ok"]  # only the new message; the repeated one was cached
    assert np.array_equal(second[: len(first) - REPLY_PRIMING_TOKENS], first[:-REPLY_PRIMING_TOKENS])


async def test_reply_priming_is_the_head_of_the_next_assistant_message():
    prompts = PromptTokenizer()
    before = await prompts.prompt_ids(MESSAGES[:2])
    after = await prompts.prompt_ids([*MESSAGES[:2], {"role": "assistant", "content": "Sure."}])
    assert np.array_equal(after[: len(before)], before)  # the whole previous prompt is a prefix
    assert np.array_equal(before[-REPLY_PRIMING_TOKENS:], REPLY_PRIMING)


def test_roles_frame_differently_outside_the_vocabulary():
    tok = get_tokenizer()
    by_role = {
        role: message_token_ids({"role": role, "content": "hi"}, tok)
        for role in ("system", "user", "assistant", "tool")
    }
    assert len({tuple(ids) for ids in by_role.values()}) == len(by_role)
    content = tok.encode("hi")
    for ids in by_role.values():
        frame = [*ids[:3], ids[-1]]
        assert list(ids[3:-1]) == content
        assert min(frame) > 200_000  # above any cl100k id


@pytest.mark.parametrize(
    "message",
    [
        "not a dict",
        {"content": "no role"},
        {"role": "user", "content": 5},
        {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1}}}]},
        {"role": "assistant", "tool_calls": ["nope"]},
    ],
)
async def test_malformed_messages_raise_value_error(message):
    with pytest.raises(ValueError):
        await PromptTokenizer().prompt_ids([message])


def _completions_prompt(messages: list[dict]) -> str:
    return "".join(message_text(m) for m in messages) + "### assistant\n"


async def test_a_completions_prompt_is_tokenised_once_per_message_as_chat_is():
    """A completions prompt (the client's rendering) costs the host the new messages only, as a chat prompt does,
    and its ids are still the whole text's: markdown headings, comments and blank lines in the messages included."""
    counting = CountingTokenizer()
    prompts = PromptTokenizer(counting)
    history = [
        {"role": "system", "content": "You are a coding agent.\n\n### Rules\n\n- be brief\n"},
        {"role": "user", "content": "## Task\n\n### Step 1\nFix the parser.\n\n### user\nnot a message\n\n"},
    ]
    for turn in range(12):
        history += [
            {"role": "assistant", "content": f"Turn {turn}.", "tool_calls": [TOOL_CALL]},
            {"role": "tool", "content": f"# parser.py\ndef f{turn}():\n    # a comment\n\n\n### not a header {turn}\n"},
        ]
        text = _completions_prompt(history)
        ids = await prompts.text_ids(text)
        assert ids.dtype == np.int32 and ids.tolist() == get_tokenizer().encode(text)
    encoded = sum(len(t) for t in counting.calls)
    assert encoded <= len(text)  # each message once: not the whole prompt again at every turn (~7x the last one)
