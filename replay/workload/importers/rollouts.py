"""RL rollout traces (JSON Lines): one stream of a rollout group per line, token lengths and tool times, no text.

A line is ``{"group", "stream", "prompt_len", "out_lens": [...], "obs_lens": [...], "tool_times": [...]}``: the
streams of a group all start from one prompt of ``prompt_len`` tokens; turn *i* of a stream generates
``out_lens[i]`` tokens, then a tool runs ``tool_times[i]`` seconds and returns ``obs_lens[i]`` tokens, which the next
turn appends. ``obs_lens`` and ``tool_times`` have one entry per turn, or one fewer (the last turn's, which no call
follows, is then absent; when present it is not replayed).

Text is generated as the synthetic workloads make it (``_blocks.BlockText``: one cl100k token per word), so every
size is exact: the group's prompt is a system message keyed by the group alone, the same bytes in every stream (a
prefix cache serves it to the group's later streams), then a one-word user message (where a run's per-task tag
goes), sized together to ``prompt_len`` by the loader's count; each answer is ``out_lens[i]`` words and each
observation a user message that, with its framing and the answer's, makes ``obs_lens[i]`` tokens, so turn *i*'s
prompt is ``prompt_len + sum(out_lens[:i]) + sum(obs_lens[:i])`` tokens by the loader's count
(``recorded.trace_input_tokens``), as the trace's tokens-in, tokens-out rollout counts it; it is more only where a
prompt is under 13 tokens or an observation under 9 (a zero-token observation appends nothing).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from replay.workload.format_v1 import MAX_TOOL_TIME_S
from replay.workload.importers._blocks import BlockText
from replay.workload.importers._delta import Call, Imported, build_trajectory
from replay.workload.importers._messages import assistant_message, make_output
from replay.workload.importers._source import Refused, Src, describe, iter_jsonl
from replay.workload.tokens import MESSAGE_OVERHEAD_TOKENS, REPLY_PRIMING_TOKENS

FORMAT = "rollout"
KEYS = ("group", "stream", "prompt_len", "out_lens")
# the prompt's share the loader counts beyond the system text: its framing, the user message's word and framing
PROMPT_FRAME = REPLY_PRIMING_TOKENS + 2 * MESSAGE_OVERHEAD_TOKENS + 1


def looks_like(obj: Any) -> bool:
    return isinstance(obj, dict) and all(k in obj for k in KEYS)


def _counts(src: Src, obj: dict[str, Any], key: str, n: int, low: int) -> list[int]:
    values = src.get(obj, key, list, "$", "a list of token counts")
    if key != "out_lens" and len(values) not in (n, n - 1):
        raise src.fail(f"$.{key}", f"expected {n} or {n - 1} entries (one per turn of out_lens); got {len(values)}")
    for i, v in enumerate(values):
        if not isinstance(v, int) or isinstance(v, bool) or v < low:
            raise src.fail(f"$.{key}[{i}]", f"expected a whole number of tokens >= {low}; got {describe(v)}")
    return values


def _times(src: Src, obj: dict[str, Any], n: int) -> list[float]:
    values = src.get(obj, "tool_times", list, "$", "a list of seconds")
    if len(values) not in (n, n - 1):
        raise src.fail("$.tool_times", f"expected {n} or {n - 1} entries (one per turn of out_lens); got {len(values)}")
    for i, v in enumerate(values):
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= MAX_TOOL_TIME_S
        if not ok:
            raise src.fail(f"$.tool_times[{i}]", f"expected seconds from 0 to {MAX_TOOL_TIME_S:g}; got {describe(v)}")
    return [float(v) for v in values]


def _stream(src: Src, obj: Any, texts: BlockText) -> tuple[str, str, list[Call]]:
    src.expect(obj, dict, "$", "a rollout stream object (group, stream, prompt_len, out_lens, ...)")
    group, stream = (src.get(obj, k, (str, int), "$", "a name or number") for k in ("group", "stream"))
    prompt_len = src.get(obj, "prompt_len", int, "$", "the prompt's length in tokens")
    if prompt_len < 1:
        raise src.fail("$.prompt_len", f"expected a whole number of tokens >= 1; got {prompt_len}")
    outs = _counts(src, obj, "out_lens", 0, 1)
    if not outs:
        raise src.fail("$.out_lens", "expected at least one turn")
    obs = _counts(src, obj, "obs_lens", len(outs), 0)
    tools = _times(src, obj, len(outs))
    key = f"{group}\x00{stream}"
    context = [
        {"role": "system", "content": texts.filler(f"{group}\x00prompt", max(1, prompt_len - PROMPT_FRAME))},
        {"role": "user", "content": texts.filler(f"{group}\x00ask", 1)},
    ]
    calls = []
    for i, n_out in enumerate(outs):
        output = make_output(texts.filler(f"{key}\x00out{i}", n_out))
        rec = {"output_tokens": n_out, "trace_input_tokens": prompt_len + sum(outs[:i]) + sum(obs[:i])}
        calls.append(Call(list(context), output, n_out, tools[i] if i < len(tools) else None, rec))
        context.append(assistant_message(output))
        if i < len(obs) and obs[i] > 0:
            words = max(1, obs[i] - 2 * MESSAGE_OVERHEAD_TOKENS)  # its framing and the answer's: tokens as sent
            context.append({"role": "user", "content": texts.filler(f"{key}\x00obs{i}", words)})
    return str(group), str(stream), calls


def import_file(path: Path, salt: str = "") -> list[Imported]:
    src = Src(path)
    texts = BlockText(salt)
    out: list[Imported] = []
    seen: dict[tuple[str, str], int] = {}
    stem = path.name.removesuffix(".jsonl")
    for lineno, obj in iter_jsonl(path):
        at = src.at(lineno)
        group, stream, calls = _stream(at, obj, texts)
        if (group, stream) in seen:
            raise at.fail("$.stream", f"group {group!r} stream {stream!r} is already on line {seen[group, stream]}")
        seen[group, stream] = lineno
        source = {
            "importer": FORMAT,
            "path": str(path),
            "line": lineno,
            "group": group,
            "stream": stream,
            "text": "synthetic: one word per cl100k token; the group's prompt shared by its streams",
            "tool_time": "tool_times",
        }
        out.append(build_trajectory(f"{FORMAT}/{stem}/{group}/{stream}", calls, source=source))
    if not out:
        raise Refused(path, "", "no rollout streams in the file")
    return out
