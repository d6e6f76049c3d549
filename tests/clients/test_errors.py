"""Every engine's refusal of a context or token limit is ``context_overflow``, in each of its wordings and shapes.

The wordings are the engines' own, as their sources write them and (vLLM, llama.cpp) as they answered here:
vLLM 0.32 (``renderers/params.py``, ``sampling_params.py``, ``v1/engine/input_processor.py``, the Responses
server), llama.cpp in llama-cpp-python 0.3.36 (``tools/server/server-context.cpp``), SGLang's tokenizer manager.
"""

from __future__ import annotations

import json

import pytest

from replay.clients.errors import http_error_class


def vllm(message: str, param: str | None = None) -> bytes:
    return json.dumps({"error": {"message": message, "type": "BadRequestError", "param": param, "code": 400}}).encode()


def vllm_messages(message: str) -> bytes:  # vLLM's /v1/messages answers in Anthropic's shape
    return json.dumps({"type": "error", "error": {"type": "BadRequestError", "message": message}}).encode()


def llamacpp(message: str) -> bytes:
    return json.dumps({"error": {"code": 400, "message": message, "type": "exceed_context_size_error",
                                 "n_prompt_tokens": 970, "n_ctx": 512}}).encode()  # fmt: skip


def sglang(message: str) -> bytes:
    return json.dumps({"object": "error", "message": message, "type": "BadRequestError", "param": None,
                       "code": 400}).encode()  # fmt: skip


LIMITS = [
    # vLLM: the prompt alone is over the served context (seen here, every flavour)
    vllm(
        "This model's maximum context length is 16384 tokens. However, your prompt contains at least 16385 input "
        "tokens, which exceeds this limit even without any output tokens. Please reduce the length of the input "
        "prompt. (parameter=input_tokens, value=16385)",
        "input_tokens",
    ),
    vllm(
        "This model's maximum context length is 4096 tokens. However, your prompt contains 90000 characters (more "
        "than 81920 characters, which is the upper bound for 4096 input tokens). Please reduce the length of the "
        "input prompt.",
        "input_text",
    ),
    # vLLM: max_tokens over the served context (seen here: chat, completions, Responses, Messages)
    vllm(
        "max_tokens=90000 cannot be greater than max_model_len=16384. Please request fewer output tokens. "
        "(parameter=max_tokens, value=90000)",
        "max_tokens",
    ),
    vllm(
        "max_output_tokens=90000 cannot be greater than max_model_len=16384. Please request fewer output tokens.",
        "max_output_tokens",
    ),
    vllm_messages(
        "max_completion_tokens=90000 cannot be greater than max_model_len=16384. Please request fewer "
        "output tokens. (parameter=max_completion_tokens, value=90000)"
    ),
    # vLLM lowered max_tokens to fit its context, and then min_tokens (= the asked length) no longer fits (seen here)
    vllm("min_tokens must be less than or equal to max_tokens=171, got 200."),
    vllm("The engine prompt length 4200 exceeds the max_model_len 4096. Please reduce prompt.", "input"),
    vllm(
        "The decoder prompt (length 4200) is longer than the maximum model length of 4096. Make sure that "
        "`max_model_len` is no smaller than the number of text tokens."
    ),
    vllm(
        "The decoder prompt (length 4096) plus the number of requested output tokens (at least 1) is longer than "
        "the maximum model length of 4096. Make sure that `max_model_len` is no smaller than the number of text "
        "tokens (prompt + requested output tokens)."
    ),
    # llama.cpp (the first seen here)
    llamacpp("request (970 tokens) exceeds the available context size (512 tokens), try increasing it"),
    llamacpp("input (970 tokens) is larger than the max context size (512 tokens). skipping"),
    # SGLang
    sglang("The input (291793 tokens) is longer than the model's context length (262144 tokens)."),
    sglang(
        "Requested token count exceeds the model's maximum context length of 32768 tokens. You requested a total "
        "of 70000 tokens: 6000 tokens from the input messages and 64000 tokens for the completion. Please reduce "
        "the number of tokens in the input messages or the completion to fit within the limit."
    ),
]


def _message(body: bytes) -> str:
    data = json.loads(body)
    return (data["error"] if isinstance(data.get("error"), dict) else data)["message"][:40]


@pytest.mark.parametrize("body", LIMITS, ids=_message)
def test_every_engines_limit_refusal_is_context_overflow(body: bytes) -> None:
    assert http_error_class(400, body) == "context_overflow"


@pytest.mark.parametrize(
    "message",
    [
        "min_tokens must be greater than or equal to 0, got -1.",
        "max_tokens must be at least 1, got 0.",
        "The model `gpt-4` does not exist.",
        "This vLLM engine does not support `store=True` and therefore does not support the background mode.",
    ],
)
def test_other_refusals_stay_http_4xx(message: str) -> None:
    assert http_error_class(400, vllm(message)) == "http_4xx"
