"""TraceLab coding-agent rounds (UW SyFI TraceLab: Claude Code and Codex sessions; JSON Lines, gzipped or not,
a JSON list, or the DuckDB release with the ``tracelab`` extra).

One row per LLM round (docs/importers.md has the schema's source): ``session_id``, ``round_index``, ``model``,
``input_tokens_total`` = ``prefix_tokens`` (served from the provider's prompt cache) + ``newly_append_tokens``,
``output_tokens``, ``reasoning_output_tokens``, the Claude cache fields, ``timing_events[]`` (``event_type``
``user_message``/``tool_result`` = input ready, ``reasoning``/``text``/``tool_call`` = model output, with
``timestamp``) and ``tools[]`` (``tool_wall_latency_ms``, ``tool_internal_latency_ms``, ``emitted_at``,
``result_at``). The public release holds no text.

Text is generated (one cl100k token per word, ``_blocks.BlockText``), laid out so the replay reuses what the
recording's cache served: round *k* keeps the first ``prefix_tokens`` (at most the previous round's input + answer)
of the previous round's request and its answer, then new text up to ``input_tokens_total``. Kept text is cut into
messages exactly where a later round stops sharing it (a cut inside a recorded answer rounds down to its start: an
answer is one message), so the loader's ``reusable_prefix_tokens`` is the shared part and ``prompt_tokens_est``
equals ``input_tokens_total`` (at most 4 more when a round adds under 5 tokens: a message has 4 of framing).
Content the provider's cache missed (an idle gap past its lifetime) is sent as new text: the trace cannot tell it
from a rewrite.

Timing (TraceLab's own definitions): a call starts at the latest input event before its first output event and
ends at its last output event (``recorded.latency_s``); tool time = the next round's start − this round's end,
which is the tools' run when the next round starts from tool results and a person's pause when it starts from a
user message (``recorded.human_wait_s`` then). Without events, the tools' wall span (first emit to last result)
is the tool time. ``recorded.tool_latency_s`` = Σ effective tool latency (internal, else wall), for comparison.
"""

from __future__ import annotations

import gzip
import itertools
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from replay.workload.importers._blocks import BlockText
from replay.workload.importers._delta import Call, Imported, build_trajectory
from replay.workload.importers._messages import make_output
from replay.workload.importers._source import ImportFailure, Refused, Src, number, parse_time, unix_seconds
from replay.workload.tokens import MESSAGE_OVERHEAD_TOKENS, REPLY_PRIMING_TOKENS

FORMAT = "tracelab"
INPUT_EVENTS = ("user_message", "tool_result")
OUTPUT_EVENTS = ("reasoning", "text", "tool_call")
MIN_PIECE = MESSAGE_OVERHEAD_TOKENS + 1  # a message with one token of text


# --------------------------------------------------------------------------------------------- reading


def _rows_duckdb(path: Path) -> list[dict[str, Any]]:
    try:
        import duckdb
    except ImportError:
        raise ImportFailure(
            path,
            "",
            "reading TraceLab's DuckDB or parquet release needs the tracelab extra: "
            "pip install 'agentic-replay[tracelab]' (or use its .jsonl.gz release)",
        ) from None
    con = duckdb.connect(str(path), read_only=True) if path.suffix == ".duckdb" else duckdb.connect()
    try:
        if path.suffix != ".duckdb":
            cur = con.execute("SELECT * FROM read_parquet(?)", [str(path)])
            return [dict(zip([d[0] for d in cur.description], r, strict=True)) for r in cur.fetchall()]
        rounds = con.execute("SELECT * FROM rounds ORDER BY round_pk")
        names = [d[0] for d in rounds.description]
        rows = {r[names.index("round_pk")]: dict(zip(names, r, strict=True)) for r in rounds.fetchall()}
        for table, key, order in (
            ("tool_calls", "tools", "tool_index"),
            ("timing_events", "timing_events", "event_index"),
        ):
            cur = con.execute(f"SELECT * FROM {table} ORDER BY round_pk, {order}")
            cols = [d[0] for d in cur.description]
            for r in cur.fetchall():
                item = dict(zip(cols, r, strict=True))
                rows[item["round_pk"]].setdefault(key, []).append(item)
        return list(rows.values())
    finally:
        con.close()


def read_rows(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """(line or row number, row) of every round in the file."""
    if path.suffix in (".duckdb", ".parquet"):
        return list(enumerate(_rows_duckdb(path), start=1))
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    stripped = data.lstrip()
    if stripped[:1] == b"[":
        try:
            rows = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise ImportFailure(path, "", f"not valid JSON ({exc})") from None
        return list(enumerate(rows, start=1))
    out = []
    for lineno, raw in enumerate(data.splitlines(), start=1):
        if raw.strip():
            try:
                out.append((lineno, orjson.loads(raw)))
            except orjson.JSONDecodeError as exc:
                raise ImportFailure(path, str(lineno), f"not valid JSON ({exc})") from None
    return out


# --------------------------------------------------------------------------------------------- timing


def _when(value: Any) -> float | None:
    """Unix seconds of an ISO string, a number, or a datetime (DuckDB's are naive UTC)."""
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp()
    return unix_seconds(parse_time(value))


def _span(row: dict[str, Any]) -> tuple[float | None, float | None, str | None]:
    """(start, end, kind of the input that started it) of a round, from its timing events."""
    events = [e for e in row.get("timing_events") or () if isinstance(e, dict)]
    outs = [t for e in events if e.get("event_type") in OUTPUT_EVENTS and (t := _when(e.get("timestamp"))) is not None]
    if not outs:
        return None, None, None
    first_out = min(outs)
    ins = [
        (t, e.get("event_type"))
        for e in events
        if e.get("event_type") in INPUT_EVENTS and (t := _when(e.get("timestamp"))) is not None and t <= first_out
    ]
    start, kind = max(ins, key=lambda x: x[0]) if ins else (None, None)
    return start, max(outs), kind


def _tools(row: dict[str, Any]) -> tuple[float | None, float | None]:
    """(Σ effective tool latency, wall span from the first emit to the last result) in seconds."""
    tools = [t for t in row.get("tools") or () if isinstance(t, dict)]
    lat = [number(t.get("tool_internal_latency_ms")) or number(t.get("tool_wall_latency_ms")) for t in tools]
    total = sum(x for x in lat if x is not None) / 1000.0 if any(x is not None for x in lat) else None
    emitted = [t for x in tools if (t := _when(x.get("emitted_at"))) is not None]
    results = [t for x in tools if (t := _when(x.get("result_at"))) is not None]
    wall = max(results) - min(emitted) if emitted and results else None
    return total, wall


# --------------------------------------------------------------------------------------------- layout


class _Layout:
    """Rounds as runs of generated text, in the loader's token units (a message costs its text + 4).

    An item is ``("piece", origin round, start, end)``: a stretch of the text that round ``origin`` added, or
    ``("out", round)``: that round's answer (one message). ``cuts[origin]`` collects where later rounds stop
    sharing a stretch, so every round's pieces are split there alike and shared messages are byte-identical.
    """

    def __init__(self, answers: list[int]) -> None:
        self.answers = answers  # answer length (words) per round
        self.cuts: dict[int, set[int]] = {}
        self.rounds: list[list[tuple[Any, ...]]] = []
        self._made: dict[tuple[Any, ...], Any] = {}  # each piece's message and each answer made once, then shared

    def cost(self, item: tuple[Any, ...]) -> int:
        return item[3] - item[2] if item[0] == "piece" else self.answers[item[1]] + MESSAGE_OVERHEAD_TOKENS

    def add(self, input_tokens: int, shared: int) -> int:
        """Lay out the next round; returns the tokens it keeps from the previous request and answer."""
        prev = [*self.rounds[-1], ("out", len(self.rounds) - 1)] if self.rounds else []
        body = input_tokens - REPLY_PRIMING_TOKENS
        target = max(0, min(shared, body - MIN_PIECE))
        kept: list[tuple[Any, ...]] = []
        total = 0
        for item in prev:
            c = self.cost(item)
            if total + c <= target:
                kept.append(item)
                total += c
                continue
            room = target - total
            if item[0] == "piece" and room >= MIN_PIECE and c - room >= MIN_PIECE:
                _, origin, start, _end = item
                self.cuts.setdefault(origin, set()).add(start + room)
                kept.append(("piece", origin, start, start + room))
                total += room
            break
        fresh = max(MIN_PIECE, body - total)
        self.rounds.append([*kept, ("piece", len(self.rounds), 0, fresh)])
        return total

    def messages(self, k: int, text: BlockText, key: str) -> list[dict[str, Any]]:
        out = []
        for item in self.rounds[k]:
            if item[0] == "out":
                out.append({"role": "assistant", "content": self.answer(item[1], text, key)})
                continue
            _, origin, start, end = item
            bounds = [start, *sorted(c for c in self.cuts.get(origin, ()) if start < c < end), end]
            for a, b in itertools.pairwise(bounds):
                msg = self._made.get((origin, a, b))
                if msg is None:
                    words = text.filler(f"{key}\x00{origin}\x00{a}\x00{b}", b - a - MESSAGE_OVERHEAD_TOKENS)
                    msg = self._made[(origin, a, b)] = {"role": "user", "content": words}
                out.append(msg)
        return out

    def answer(self, k: int, text: BlockText, key: str) -> str:
        made = self._made.get(("out", k))
        if made is None:
            made = self._made[("out", k)] = text.filler(f"{key}\x00{k}\x00out", self.answers[k])
        return made


# --------------------------------------------------------------------------------------------- calls


def _recorded(row: dict[str, Any]) -> dict[str, Any]:
    rec: dict[str, Any] = {"prompt_tokens": int(row["input_tokens_total"]), "output_tokens": int(row["output_tokens"])}
    for key, name in (
        ("prefix_tokens", "cached_tokens"),
        ("claude_cache_creation_input_tokens", "cache_creation_tokens"),
        ("reasoning_output_tokens", "reasoning_tokens"),
    ):
        if number(row.get(key)) is not None:
            rec[name] = int(row[key])
    if row.get("model"):
        rec["model"] = str(row["model"])
    return rec


def _session(rows: list[dict[str, Any]], traj_id: str, texts: BlockText) -> tuple[list[Call], dict[str, Any]]:
    answers = [max(1, int(r["output_tokens"])) for r in rows]
    layout = _Layout(answers)
    kept = [layout.add(int(r["input_tokens_total"]), int(number(r.get("prefix_tokens")) or 0)) for r in rows]
    spans = [_span(r) for r in rows]
    calls: list[Call] = []
    how: set[str] = set()
    for k, row in enumerate(rows):
        rec = _recorded(row)
        rec["replay_shared_tokens"] = kept[k]
        start, end, _ = spans[k]
        if start is not None and end is not None:
            rec["latency_s"] = round(max(0.0, end - start), 6)
            rec["timestamp"] = start
        tool_sum, wall = _tools(row)
        if tool_sum is not None:
            rec["tool_latency_s"] = round(tool_sum, 6)
        tool_time = None
        if k + 1 < len(rows):
            nxt_start, _, trigger = spans[k + 1]
            if end is not None and nxt_start is not None:
                tool_time = max(0.0, nxt_start - end)
                how.add("timing events")
                if trigger == "user_message":
                    rec["human_wait_s"] = round(tool_time, 6)
            elif wall is not None:
                tool_time = max(0.0, wall)
                how.add("the tools' wall span (no timing events)")
        output = make_output(layout.answer(k, texts, traj_id))
        calls.append(Call(layout.messages(k, texts, traj_id), output, answers[k], tool_time, rec))
    source = {"tool_time": " and ".join(sorted(how)) if how else "none recorded (no timing events or tool times)"}
    return calls, source


def import_file(path: Path, salt: str = "") -> list[Imported]:
    src = Src(path)
    sessions: dict[str, list[tuple[int, int, dict[str, Any]]]] = {}
    for n, (where, row) in enumerate(read_rows(path)):
        s = src.at(where)
        s.expect(row, dict, "$", "a TraceLab round object")
        sid = s.get(row, "session_id", (str, int), "$", "the session id")
        index = s.get(row, "round_index", int, "$", "the round's position in its session (an integer)")
        for key in ("input_tokens_total", "output_tokens"):
            s.get(row, key, int, "$", "a token count (an integer)")
        sessions.setdefault(str(sid), []).append((index, n, row))
    if not sessions:
        raise Refused(path, "", "no rounds in the trace")
    texts = BlockText(salt)
    out = []
    for sid, entries in sessions.items():
        rows = [row for _, _, row in sorted(entries, key=lambda e: (e[0], e[1]))]
        traj_id = f"{FORMAT}/{sid}"
        calls, notes = _session(rows, traj_id, texts)
        source = {
            "importer": FORMAT,
            "path": str(path),
            "text": "synthetic: one word per cl100k token; reuse laid out from prefix_tokens",
            "input": "rebuilt (token counts only: the release holds no text)",
            **notes,
        }
        models = {r.get("model") for r in rows if r.get("model")}
        model = str(next(iter(models))) if len(models) == 1 else None
        out.append(build_trajectory(traj_id, calls, source=source, model=model))
    return out
