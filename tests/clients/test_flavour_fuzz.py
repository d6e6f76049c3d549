"""Whatever a host sends, every flavour's reader ends the call as one classified outcome, never an exception.

The readers are fuzzed with arbitrary valid-JSON events of plausible and implausible shapes (the keys each flavour
looks at, with arbitrary values under them), and with arbitrary bytes cut into arbitrary reads. The stream module
catches a reader's own exception as a last resort and says so ("could not be read"): these tests fail if that
safety net is ever needed. A longer run:
``HYPOTHESIS_PROFILE=long python -m pytest tests/clients/test_flavour_fuzz.py``.
"""

from __future__ import annotations

import json
import os
import random
import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replay.clients.client import FLAVOURS
from replay.clients.flavours.base import RequestOptions
from replay.clients.sse import parse_block
from replay.clients.stream import ANSWER, FIRST_NOT_PLAIN, MIN_RUN, NONE, PEEL_LAST, StreamState, interpret, templated

settings.register_profile("suite", max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile(
    "long",
    max_examples=int(os.environ.get("REPLAY_FUZZ_EXAMPLES", "20000")),
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "suite"))

KNOWN = {"stream_error", "malformed_stream", "bad_usage", "incomplete", "empty"}
KEYS = ["choices", "delta", "content", "reasoning", "reasoning_content", "tool_calls", "finish_reason", "usage",
        "prompt_tokens", "completion_tokens", "prompt_tokens_details", "cached_tokens", "error", "timings", "text",
        "type", "message", "response", "index", "input_tokens", "output_tokens", "cache_read_input_tokens",
        "cache_creation_input_tokens", "input_tokens_details", "output_tokens_details", "incomplete_details", "id",
        "model", "x_groq", "partial_json", "thinking", "stop_reason"]  # fmt: skip
TYPES = ["message_start", "content_block_delta", "message_delta", "message_stop", "error", "ping", "text_delta",
         "thinking_delta", "input_json_delta", "response.created", "response.output_text.delta",
         "response.reasoning_text.delta", "response.completed", "response.incomplete", "response.failed",
         "response.function_call_arguments.delta"]  # fmt: skip

leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
    st.sampled_from(TYPES),
)
values = st.recursive(
    leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.sampled_from(KEYS), inner, max_size=5),
    ),
    max_leaves=20,
)
events = st.dictionaries(st.sampled_from(KEYS), values, max_size=6)


def encode(obj: object, name: str | None) -> bytes:
    head = f"event: {name}\n".encode() if name else b""
    return head + b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


@given(
    api=st.sampled_from(sorted(FLAVOURS)),
    stream=st.lists(st.tuples(events, st.one_of(st.none(), st.sampled_from(TYPES))), max_size=8),
    done=st.booleans(),
    cuts=st.lists(st.integers(min_value=1, max_value=4000), max_size=6),
)
def test_any_json_events_end_as_one_classified_outcome(api, stream, done, cuts) -> None:
    data = b"".join(encode(obj, name) for obj, name in stream) + (b"data: [DONE]\n\n" if done else b"")
    reads = _cut(data, cuts)
    _check(api, reads)


@given(api=st.sampled_from(sorted(FLAVOURS)), data=st.binary(max_size=600), cuts=st.lists(st.integers(1, 600)))
def test_any_bytes_end_as_one_classified_outcome(api, data, cuts) -> None:
    _check(api, _cut(data, cuts))


def _cut(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c for c in cuts if c < len(data)})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True) if data[a:b]]


def _check(api: str, reads: list[bytes]) -> None:
    flavour = FLAVOURS[api](RequestOptions(model="m"))
    times = [float(i + 1) for i in range(len(reads))]
    for collect in (False, True):
        state = interpret(flavour, reads, times, 0.0, collect)
        assert "could not be read" not in (state.malformed or ""), state.malformed  # the reader raised
        failed = flavour.outcome(state, b"")
        assert failed is None or failed[0] in KNOWN
        if failed is None:  # a success must be a whole, understood stream with plausible counts
            assert state.ended and state.events > 0 and state.malformed is None and state.error is None
            for n in (state.usage.prompt, state.usage.cached, state.usage.output):
                assert n is None or (isinstance(n, int) and 0 <= n < 2**31)
        json.dumps(state.chunks)  # figures a record can hold


def _templates(api: str) -> list[tuple[object, str | None]]:
    """Plausible events of each flavour: token deltas, a usage report, the end."""
    if api in ("chat", "completions"):
        key = {"delta": {"content": "x"}} if api == "chat" else {"text": "x"}
        usage = {"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 3}}
        return [({"choices": [{"index": 0, **key, "finish_reason": None}]}, None), (usage, None)]
    if api == "responses":
        delta = {"type": "response.output_text.delta", "item_id": "m", "output_index": 0, "delta": "x"}
        done = {"type": "response.completed", "response": {"id": "r", "usage": {"input_tokens": 9, "output_tokens": 3}}}
        return [(delta, "response.output_text.delta"), (done, "response.completed")]
    delta = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "x"}}
    start = {"type": "message_start", "message": {"id": "m", "usage": {"input_tokens": 9, "output_tokens": 1}}}
    return [(start, "message_start"), (delta, "content_block_delta"), ({"type": "message_stop"}, "message_stop")]


def _mutate(obj: object, path: list[int], value: object) -> object:
    """``obj`` with the node that ``path`` picks (indices into each level's keys or items) replaced by ``value``."""
    if not path or not isinstance(obj, dict | list) or not obj:
        return value
    if isinstance(obj, dict):
        keys = list(obj)
        k = keys[path[0] % len(keys)]
        return {**obj, k: _mutate(obj[k], path[1:], value)}
    i = path[0] % len(obj)
    return [*obj[:i], _mutate(obj[i], path[1:], value), *obj[i + 1 :]]


@given(
    api=st.sampled_from(sorted(FLAVOURS)),
    picks=st.lists(st.integers(0, 2), min_size=1, max_size=12),
    mutations=st.lists(st.tuples(st.integers(0, 11), st.lists(st.integers(0, 5), max_size=4), values), max_size=3),
    cuts=st.lists(st.integers(min_value=1, max_value=2000), max_size=6),
)
def test_the_fast_paths_read_any_stream_exactly_as_decoding_every_event_does(api, picks, mutations, cuts) -> None:
    """The byte-count paths may only decline to decide; they must never decide differently from a full decode."""
    templates = _templates(api)
    events = [templates[p % len(templates)] for p in picks]
    for index, path, value in mutations:
        obj, name = events[index % len(events)]
        events[index % len(events)] = (_mutate(obj, path, value), name)
    data = b"".join(encode(obj, name) for obj, name in events) + (b"data: [DONE]\n\n" if api in ("chat", "completions")
                                                                 else b"")  # fmt: skip
    reads = _cut(data, cuts)
    _read_as_a_full_decode(api, reads)


@given(
    api=st.sampled_from(sorted(FLAVOURS)),
    plain=st.integers(20, 200),
    odd=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 2)), max_size=4),
    mutations=st.lists(st.tuples(st.integers(0, 10_000), st.lists(st.integers(0, 5), max_size=4), values), max_size=2),
    per_read=st.sampled_from([0, 1, 3]),
)
def test_a_long_answer_is_read_as_decoding_every_event_does(api, plain, odd, mutations, per_read) -> None:
    """A host that writes the whole answer at once gives one long region, one that writes an event per read a long
    run of one-event regions: their unusual events (anywhere, not only first and last) are cut out and decoded, the
    rest counted by bytes, and the figures are those of a full decode (``per_read``: events per read, 0 all)."""
    templates = _templates(api)
    delta = next(t for t in templates if "delta" in json.dumps(t[0]) or "text" in json.dumps(t[0]))
    events = [templates[0], *[delta] * plain, *templates[1:]]
    for at, pick in odd:
        events.insert(at % len(events), templates[pick % len(templates)])
    for at, path, value in mutations:
        obj, name = events[at % len(events)]
        events[at % len(events)] = (_mutate(obj, path, value), name)
    data = b"".join(encode(obj, name) for obj, name in events) + (b"data: [DONE]\n\n" if api in ("chat", "completions")
                                                                 else b"")  # fmt: skip
    blocks = [encode(obj, name) for obj, name in events]
    reads = [data] if not per_read else [b"".join(blocks[i : i + per_read]) for i in range(0, len(blocks), per_read)]
    if per_read and api in ("chat", "completions"):
        reads.append(b"data: [DONE]\n\n")
    _read_as_a_full_decode(api, reads)


# Texts as a model writes them, then JSON-escaped: quotes, backslashes, newlines, braces, keys the scans look for.
texts = st.lists(st.sampled_from(['a', ' ', '"', '\\', '\n', '{', '}', ':', ',', '"content":"', 'reasoning', 'é',
                                   '\u2028', '\x01', '\\"']), max_size=6).map("".join)  # fmt: skip
# Raw bytes a broken host might put anywhere in a stream (none makes an invalid escape, which no path checks).
edits = st.sampled_from([b'"', b"\n", b"\n\n", b"{", b"}", b":", b",", b'\\"', b"\\\\", b'":{', b"data: ", b"\t",
                         b"\xc3"])  # fmt: skip


def _with_text(obj: object, text: str) -> object:
    """A template delta with ``text`` in place of its ``"x"``."""
    return json.loads(json.dumps(obj).replace('"x"', json.dumps(text)))


def _deltas(api: str, words: list[str], plain: int, utf8: bool = False) -> list[bytes]:
    """Plain deltas with these texts; ``utf8``: non-ASCII text written raw, as most hosts do, not ``\\u`` escaped."""
    templates = _templates(api)
    obj, name = next(t for t in templates if "delta" in json.dumps(t[0]) or "text" in json.dumps(t[0]))
    blocks = [encode(_with_text(obj, words[i % len(words)]), name) for i in range(plain)]
    return [b.replace(b"\\u00e9", "é".encode()) for b in blocks] if utf8 else blocks


@given(
    api=st.sampled_from(sorted(FLAVOURS)),
    words=st.lists(texts, min_size=1, max_size=40),
    plain=st.integers(2, 120),
    per_read=st.sampled_from([0, 1, 2]),
)
def test_deltas_with_any_text_are_read_as_decoding_every_event_does(api, words, plain, per_read) -> None:
    """The framing-template count (``stream.templated``) on answers whose texts hold anything a JSON string can."""
    templates = _templates(api)
    blocks = [encode(*templates[0]), *_deltas(api, words, plain), *(encode(*t) for t in templates[1:])]
    if api in ("chat", "completions"):
        blocks.append(b"data: [DONE]\n\n")
    reads = [b"".join(blocks)] if not per_read else [b"".join(blocks[i : i + per_read])
                                                     for i in range(0, len(blocks), per_read)]  # fmt: skip
    _read_as_a_full_decode(api, reads)


@given(
    api=st.sampled_from(sorted(FLAVOURS)),
    words=st.lists(texts, min_size=1, max_size=10),
    plain=st.integers(1, 40),
    damage=st.lists(st.tuples(st.integers(0, 100_000), edits), min_size=1, max_size=3),
    utf8=st.booleans(),
)
def test_the_template_count_never_takes_a_damaged_region_for_plain_deltas(api, words, plain, damage, utf8) -> None:
    """Raw bytes inserted anywhere in a run of plain deltas (in a text, in the framing, at a boundary): the template
    count either declines, or every event of the region decodes as a plain delta and the count is theirs."""
    flavour = FLAVOURS[api](RequestOptions(model="m"))
    region = b"".join(_deltas(api, words, plain, utf8))[:-2]  # a region as the framing gives it: no closing blank line
    for at, edit in damage:
        at %= len(region)
        region = region[:at] + edit + region[at:]
    counted = templated(region, flavour)
    if counted is None or counted is FIRST_NOT_PLAIN:
        return
    answers, blocks = 0, region.split(b"\n\n")
    for block in blocks:
        parsed = parse_block(block)
        assert parsed is not None, block
        state = StreamState()
        kind = flavour.decode(state, *parsed)
        assert state.malformed is None and state.error is None and not state.usage_parts, block
        assert kind in (ANSWER, NONE), block  # an empty text is NONE, as the count discounts it
        answers += kind == ANSWER
    assert counted == (len(blocks), answers)


def _read_as_a_full_decode(api: str, reads: list[bytes]) -> None:
    """The byte-count paths may only decline to decide; they must never decide differently from a full decode."""
    flavour = FLAVOURS[api](RequestOptions(model="m"))
    times = [float(i + 1) for i in range(len(reads))]
    fast = interpret(flavour, reads, times, 0.0)
    slow = interpret(flavour, reads, times, 0.0, collect=True)
    assert (fast.events, fast.first_token, fast.first_answer, fast.last_token, fast.chunks) == (
        slow.events, slow.first_token, slow.first_answer, slow.last_token, slow.chunks)  # fmt: skip
    assert (fast.malformed is None, fast.error, fast.ended, fast.usage) == (
        slow.malformed is None, slow.error, slow.ended, slow.usage)  # fmt: skip


@given(
    start=st.floats(0, 1e4),
    steps=st.lists(st.sampled_from([0.0, 1e-7, 4e-7, 1e-6, 1.5e-6, 1e-3, 0.01]), min_size=1, max_size=60),
    before=st.lists(st.tuples(st.floats(0, 1e-3), st.integers(1, 3)), max_size=3),
)
def test_reads_added_at_once_are_the_reads_added_one_by_one(start, steps, before) -> None:
    """``StreamState.add_reads`` (one event per read, rounded and merged in bulk) against ``add`` read by read,
    after some reads already added, with reads closer together than the µs the times are rounded to."""
    times, t = [], start + 0.5
    for step in steps:
        t += step
        times.append(t)
    bulk, single = StreamState(), StreamState()
    for dt, n in before:
        for state in (bulk, single):
            state.add(start + dt, start, n, True)
    bulk.add_reads(times, start)
    for t in times:
        single.add(t, start, 1, True)
    assert (bulk.events, bulk.first_token, bulk.first_answer, bulk.last_token, bulk.chunks) == (
        single.events, single.first_token, single.first_answer, single.last_token, single.chunks)  # fmt: skip
    assert all(type(n) is int for n in bulk.chunks[1::2])  # counts stay whole numbers in the record


# --- the differential test: the same damaged bytes, every split into reads, the fast paths against a full decode --
DAMAGE = [b"x", b"}", b"{", b"]", b",", b'"', b"\\", b"\n", b" ", b"\xff", b"\xc3", b"\x01", b"\x7f", b"\xef\xbb\xbf",
          b"\\u00", b'":{', b"data: ", b"event: error\n", b"}\n\n"]  # fmt: skip
WORDS = ["a", " the", "é", '"', "\\", "\n", "{", "}", "[DONE]", "error", "\u2028", "reasoning", '"content":"']
FUZZ_SEED = int(os.environ.get("REPLAY_FUZZ_SEED", "25"))
FUZZ_BUDGET_S = float(os.environ.get("REPLAY_FUZZ_BUDGET_S", "8"))  # after the fixed floor of cases below
FUZZ_FLOOR = 24  # cases always run, whatever the budget: the same ones on every machine


def _stream(rng: random.Random, api: str) -> bytes:
    """A plausible answer in ``api``'s shape (deltas sharing a framing, or OpenAI's padded ones), then damaged."""
    templates = _templates(api)
    delta = next(t for t in templates if "delta" in json.dumps(t[0]) or "text" in json.dumps(t[0]))
    n = rng.randint(MIN_RUN + PEEL_LAST + 2, 40)
    blocks = [encode(*templates[0])]
    for _ in range(n):
        obj = _with_text(delta[0], rng.choice(WORDS))
        if rng.random() < 0.3:  # deltas that differ in more than their text: counted by bytes, not by a framing
            obj = {**obj, "obfuscation": "".join(rng.choices("abcXYZ", k=rng.randint(1, 9)))}
        blocks.append(encode(obj, delta[1]))
    blocks += [encode(*t) for t in templates[1:]] + ([b"data: [DONE]\n\n"] if api in ("chat", "completions") else [])
    data = b"".join(blocks)
    for _ in range(rng.randint(1, 3)):
        at = rng.randrange(len(data))
        kind = rng.random()
        if kind < 0.5:
            data = data[:at] + rng.choice(DAMAGE) + data[at:]
        elif kind < 0.75:
            data = data[:at] + data[at + rng.randint(1, 6) :]
        else:  # an event cut short: its last bytes before the blank line gone
            end = data.find(b"\n\n", at)
            if end > at:
                data = data[: max(at, end - rng.randint(1, 8))] + data[end:]
    return data


def _verdict(api: str, reads: list[bytes], collect: bool) -> tuple:
    flavour = FLAVOURS[api](RequestOptions(model="m"))
    st = interpret(flavour, reads, [float(i + 1) for i in range(len(reads))], 0.0, collect)
    failed = flavour.outcome(st, b"")
    return (failed[0] if failed else None, st.events, st.ended, st.error is not None, st.finish_reason, st.usage)


def _splits(rng: random.Random, data: bytes) -> list[list[bytes]]:
    """Every two-read split near the stream's event boundaries and at random places, the stream in one read, one
    event per read, and a few arbitrary many-read splits."""
    points = set(range(1, min(len(data), 48)))  # (the first event, where the fast paths start)
    at = data.find(b"\n\n")
    while at >= 0:
        points.update(range(max(1, at - 2), min(len(data), at + 4)))
        at = data.find(b"\n\n", at + 1)
    points.update(rng.randrange(1, len(data)) for _ in range(24) if len(data) > 1)
    out = [[data], [b + b"\n\n" for b in data.split(b"\n\n")[:-1]] + [data.rsplit(b"\n\n", 1)[-1]]]
    out = [[r for r in reads if r] for reads in out]
    out += [[data[:p], data[p:]] for p in sorted(points) if 0 < p < len(data)]
    for _ in range(4):
        cuts = sorted(rng.sample(range(1, len(data)), min(len(data) - 1, rng.randint(2, 30))))
        out.append(_cut(data, cuts))
    return out


def test_the_fast_paths_decide_as_a_full_decode_on_damaged_bytes_split_every_way() -> None:
    """Issue 25, item 3: the same (damaged) bytes, split into reads every way around each event boundary and at
    random, in every flavour: the verdict and the counts are those of a full decode of the whole stream, by the fast
    paths and by the full decode alike, however TCP cut the bytes. A fixed seed; after a fixed floor of cases, more
    while the time budget lasts (``REPLAY_FUZZ_BUDGET_S``, ``REPLAY_FUZZ_SEED`` for a longer or another run)."""
    rng = random.Random(FUZZ_SEED)
    end, cases = time.monotonic() + FUZZ_BUDGET_S, 0
    while cases < FUZZ_FLOOR or time.monotonic() < end:
        api = sorted(FLAVOURS)[cases % len(FLAVOURS)]
        data = _stream(rng, api)
        truth = _verdict(api, [data], collect=True)
        for reads in _splits(rng, data):
            for collect in (False, True):
                assert _verdict(api, reads, collect) == truth, (api, collect, data, [len(r) for r in reads])
        cases += 1
