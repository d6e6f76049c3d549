"""Importers against the real recorded trajectories of the development set (read in place, never copied).

Every figure the importers produce is checked against an independent, deliberately simple recount made
here straight from the source JSON: per call, rebuild the input as a list of plain tuples, count cl100k
tokens per message (content + tool-call name/arguments + 4 framing, + 3 per request), and take the longest
common prefix with the previous input plus its output, message by message.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from replay.cli import main
from replay.workload.importers import import_paths, write_canonical
from replay.workload.importers.openhands import _recall_text
from replay.workload.tokens import get_tokenizer
from replay.workload.trajectory import load_workload
from tests.support.paths import SHARED

REAL = SHARED / "trajectories" / "real"
if not REAL.is_dir():
    pytest.skip(f"real trajectories not available at {REAL}", allow_module_level=True)

_ENC = get_tokenizer()
_memo: dict[tuple, int] = {}


def tokens(msg: tuple) -> int:
    """(role, text, ((name, args), ...), tool_call_id) → tokens: content + calls + 4."""
    n = _memo.get(msg)
    if n is None:
        n = len(_ENC.encode(msg[1])) + sum(len(_ENC.encode(a + b)) for a, b in msg[2]) + 4
        _memo[msg] = n
    return n


def text(content) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content if isinstance(p, dict))


def calls_of(msg: dict) -> tuple:
    return tuple((c["function"]["name"], c["function"]["arguments"]) for c in msg.get("tool_calls") or ())


def figures(inputs: list[list[tuple]], outputs: list[tuple]) -> tuple[list[int], list[int]]:
    """Per call: prompt tokens and reusable prefix tokens, recomputed from scratch."""
    prompts, reusable = [], []
    for k, cur in enumerate(inputs):
        prompts.append(sum(tokens(m) for m in cur) + 3)
        if k == 0:
            reusable.append(0)
            continue
        prev = [*inputs[k - 1], outputs[k - 1]]
        n = 0
        while n < min(len(prev), len(cur)) and prev[n] == cur[n]:
            n += 1
        reusable.append(sum(tokens(m) for m in cur[:n]))
    return prompts, reusable


# ------------------------------------------------------------------------------------ independent recounts


def mini_calls(path: Path):
    data = json.loads(path.read_text())
    ctx, ins, outs = [], [], []
    for m in data["messages"]:
        role = m["role"]
        if role == "exit":
            break
        if role == "assistant":
            out = ("assistant", text(m.get("content")), calls_of(m), None)
            ins.append(list(ctx))
            outs.append(out)
            ctx.append(out)
        elif role == "tool":
            ctx.append(("tool", m["content"], (), m["tool_call_id"]))
        else:
            ctx.append((role, m["content"], (), None))
    return ins, outs


def _swe_msg(m: dict) -> tuple:
    if m["role"] == "assistant":
        return ("assistant", text(m.get("content")), calls_of(m), None)
    if m["role"] == "tool" and m.get("tool_call_ids"):
        return ("tool", text(m["content"]), (), m["tool_call_ids"][0])
    return ("user" if m["role"] == "tool" else m["role"], text(m["content"]), (), None)


def swe_calls(path: Path):
    data = json.loads(path.read_text())
    steps = data.get("trajectory") or []
    if steps and all("messages" in s for s in steps):
        after = [[_swe_msg(m) for m in s["messages"]] for s in steps]
        ins = [after[0][:-2], *after[:-1]]
        outs = [a[-2] for a in after]
        return ins, outs
    hist = [_swe_msg(m) for m in data["history"]]
    idx = [i for i, m in enumerate(hist) if m[0] == "assistant"]
    ins = [hist[:i] for i in idx]
    outs = [hist[i] for i in idx]
    responses = {m.get("content") for m in data["history"] if m["role"] == "assistant"}
    if len(steps) > len(idx) and steps[-1]["response"] not in responses and hist[-1][0] != "assistant":
        ins.append(hist)
        outs.append(("assistant", steps[-1]["response"], (), None))
    return ins, outs


def openhands_calls(path: Path):
    if path.suffix == ".jsonl":
        events = json.loads(path.read_text().splitlines()[0])["history"]
    else:
        events = json.loads(path.read_text())
    ctx, ins, outs, seen = [], [], [], set()
    for e in events:
        action, obs = e.get("action"), e.get("observation")
        meta = e.get("tool_call_metadata") or {}
        rid = (meta.get("model_response") or {}).get("id")
        if action == "system":
            ctx.append(("system", e["args"]["content"], (), None))
        elif action and rid:
            if rid in seen:
                continue
            seen.add(rid)
            msg = meta["model_response"]["choices"][0]["message"]
            out = ("assistant", text(msg.get("content")), calls_of(msg), None)
            ins.append(list(ctx))
            outs.append(out)
            ctx.append(out)
        elif action == "message":
            if e["source"] == "agent":
                out = ("assistant", e["args"]["content"], (), None)
                ins.append(list(ctx))
                outs.append(out)
                ctx.append(out)
            else:
                ctx.append(("user", e["args"]["content"], (), None))
        elif obs == "recall":
            if _recall_text(e.get("extras") or {}):
                ctx.append(("user", _recall_text(e["extras"]), (), None))
        elif obs and meta.get("tool_call_id") and rid in seen:
            ctx.append(("tool", e["content"], (), meta["tool_call_id"]))
        elif obs == "error":
            ctx.append(("user", e["content"], (), None))
    return ins, outs


def claude_calls(path: Path):
    lines = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    ctx, ins, outs, out_tokens = [], [], [], []
    cur = None

    def flush():
        nonlocal cur
        if cur is None:
            return
        out = ("assistant", "".join(cur["text"]), tuple(cur["calls"]), None)
        ins.append(list(ctx))
        outs.append(out)
        out_tokens.append(cur["usage"]["output_tokens"])
        ctx.append(out)
        cur = None

    for e in lines:
        if e["type"] == "assistant":
            m = e["message"]
            if cur is not None and cur["id"] != m["id"]:
                flush()
            if cur is None:
                cur = {"id": m["id"], "text": [], "calls": []}
            cur["usage"] = m["usage"]
            for b in m["content"]:
                if b["type"] == "text":
                    cur["text"].append(b["text"])
                elif b["type"] == "tool_use":
                    cur["calls"].append((b["name"], json.dumps(b["input"], ensure_ascii=False, separators=(",", ":"))))
        elif e["type"] == "user":
            flush()
            content = e["message"]["content"]
            if isinstance(content, str):
                ctx.append(("user", content, (), None))
            else:
                for b in content:
                    if b["type"] == "tool_result":
                        ctx.append(("tool", text(b["content"]), (), b["tool_use_id"]))
    flush()
    return ins, outs, out_tokens


RECOUNT = {"swe-agent": swe_calls, "mini-swe-agent": mini_calls, "openhands": openhands_calls}


# ------------------------------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    """The whole development set imported once, written canonically and loaded back by the loader."""
    result = import_paths([REAL])
    out = tmp_path_factory.mktemp("real") / "real.jsonl"
    with out.open("wb") as fh:
        write_canonical(result.trajectories, fh)
    workload = load_workload([out])
    return result, out, {t.id: t for t in workload.trajectories}


def _by_path(result, workload):
    out: dict[str, list] = {}
    for t in result.trajectories:
        out.setdefault(t.header["source"]["path"], []).append(workload[t.id])
    return out


# ------------------------------------------------------------------------------------------ tests


def test_every_file_imports_or_is_refused_with_the_documented_reason(imported):
    result, _, _ = imported
    files = sorted(str(p) for p in REAL.rglob("*") if p.is_file())
    done = {f.path for f in result.files}
    refused = {p: reason for p, reason, _ in result.refused}
    assert set(files) == done | set(refused)
    assert set(refused) == {str(REAL / "README.md")}
    assert refused[str(REAL / "README.md")].startswith("not JSON or JSON Lines")
    formats = {f.format for f in result.files}
    assert formats == {"swe-agent", "mini-swe-agent", "openhands", "claude-code", "weka"}
    assert len(result.trajectories) == 58


@pytest.mark.parametrize("fmt", ["swe-agent", "mini-swe-agent", "openhands"])
def test_turns_tokens_and_reuse_match_an_independent_recount(imported, fmt):
    result, _, workload = imported
    by_path = _by_path(result, workload)
    pooled = [0, 0, 0, 0]  # importer reusable, prompt; recount reusable, prompt
    for f in result.files:
        if f.format != fmt:
            continue
        (traj,) = by_path[f.path]
        ins, outs = RECOUNT[fmt](Path(f.path))
        prompts, reusable = figures(ins, outs)
        assert len(traj.turns) == len(ins), f.path
        # Round trip: the canonical file's prompt estimates are a direct count of the source inputs.
        assert [t.prompt_tokens_est for t in traj.turns] == prompts, f.path
        mine = sum(t.reusable_prefix_tokens for t in traj.turns) / sum(prompts)
        assert mine == pytest.approx(sum(reusable) / sum(prompts), abs=0.01), f.path
        pooled[0] += sum(t.reusable_prefix_tokens for t in traj.turns)
        pooled[1] += sum(t.prompt_tokens_est for t in traj.turns)
        pooled[2] += sum(reusable)
        pooled[3] += sum(prompts)
    assert pooled[0] / pooled[1] == pytest.approx(pooled[2] / pooled[3], abs=0.01)


def test_source_specific_turn_counts(imported):
    result, _, workload = imported
    by_path = _by_path(result, workload)
    turns = {Path(p).name: [len(t.turns) for t in ts] for p, ts in by_path.items()}
    mini = sorted(n for name, (n,) in ((k, v) for k, v in turns.items() if k.endswith(".traj.json")))
    assert (mini[0], mini[len(mini) // 2], mini[-1]) == (9, 18, 45)  # the set's README: 9 / 18 / 45
    oh = sorted(v[0] for k, v in turns.items() if k.startswith(("runtime_trajs", "multi_swe_bench")))
    assert oh == [2, 4, 5, 23, 33]
    assert turns["ctf__crypto__BabyEncryption.traj"] == [15]  # a retried edit never reached the history
    swe = next(k for k in turns if "sweagenttestrepo-1c2844" in k)
    assert turns[swe] == [5]  # four history calls + the submit call
    # Rewritten history (older observations elided) is kept: truncations break reuse.
    exact = next(t for p, (t,) in by_path.items() if "replace_from_source" in p)
    assert any(t.truncate_to is not None for t in exact.turns)
    assert sum(t.reusable_prefix_tokens for t in exact.turns) / sum(t.prompt_tokens_est for t in exact.turns) < 0.6


def test_mini_swe_agent_recorded_figures(imported):
    result, _, workload = imported
    path = REAL / "mini-swe-agent-v2" / "llm-ablation__gpt-5-mini__astropy__astropy-13033.traj.json"
    data = json.loads(path.read_text())
    (traj,) = _by_path(result, workload)[str(path)]
    assistants = [m for m in data["messages"] if m["role"] == "assistant"]
    for turn, m in zip(traj.turns, assistants, strict=True):
        usage = m["extra"]["response"]["usage"]
        assert turn.output_tokens == usage["completion_tokens"]
        assert turn.recorded["prompt_tokens"] == usage["prompt_tokens"]
        assert turn.recorded["cached_tokens"] == usage["prompt_tokens_details"]["cached_tokens"]
        assert turn.recorded["reasoning_tokens"] == usage["completion_tokens_details"]["reasoning_tokens"]
        assert turn.recorded["latency_s"] >= 0 and turn.tool_time_s >= 0
    tools = [m for m in data["messages"] if m["role"] == "tool"]
    first_tool_time = tools[0]["extra"]["timestamp"] - assistants[0]["extra"]["timestamp"]
    assert traj.turns[0].tool_time_s == pytest.approx(first_tool_time, abs=1e-6)
    assert traj.source["unrecorded_calls"] == data["info"]["model_stats"]["api_calls"] - len(assistants)


def test_claude_code_matches_recount_and_the_weka_trace_of_the_same_session(imported):
    result, _, workload = imported
    weka = json.loads((REAL / "weka" / "sample_trace_with_subagent.json").read_text())
    outs_by_agent = {r["agent_id"]: [q["out"] for q in r["requests"]] for r in weka["requests"] if "agent_id" in r}
    by_path = _by_path(result, workload)
    for path in sorted((REAL / "claude-code").glob("agent-*.jsonl")):
        (traj,) = by_path[str(path)]
        ins, outs, out_tokens = claude_calls(path)
        prompts, reusable = figures(ins, outs)
        assert [t.prompt_tokens_est for t in traj.turns] == prompts
        mine = sum(t.reusable_prefix_tokens for t in traj.turns) / sum(prompts)
        assert mine == pytest.approx(sum(reusable) / sum(prompts), abs=0.01)
        assert [t.output_tokens for t in traj.turns] == out_tokens == outs_by_agent[path.stem.removeprefix("agent-")]
        assert traj.source["sidechain"] is True and not traj.subagent  # no parent here: a task of its own
        assert all(t.recorded["cached_tokens"] <= t.recorded["prompt_tokens"] for t in traj.turns)
    assert {len(ts[0].turns) for p, ts in by_path.items() if "/claude-code/" in p} == {21, 23}


def test_claude_code_unrecorded_context_per_call(imported):
    """What the provider counted beyond what the replay sends, call by call (docs/importers.md has the figures)."""
    result, _, workload = imported
    weka = json.loads((REAL / "weka" / "sample_trace_with_subagent.json").read_text())
    warm = {r["agent_id"]: r["tool_tokens"] + r["system_tokens"] for r in weka["requests"] if "agent_id" in r}
    by_path = _by_path(result, workload)
    for path in sorted((REAL / "claude-code").glob("agent-*.jsonl")):
        (traj,) = by_path[str(path)]
        usages = [json.loads(x)["message"]["usage"] for x in path.read_text().splitlines() if '"assistant"' in x]
        recorded = [u["input_tokens"] + u["cache_read_input_tokens"] + u["cache_creation_input_tokens"] for u in usages]
        prompts, _ = figures(*claude_calls(path)[:2])
        gaps = [t.recorded["unrecorded_context_tokens"] for t in traj.turns]
        assert gaps == [r - p for r, p in zip(recorded, prompts, strict=True)]
        assert traj.source["unrecorded_context_tokens"] == sum(gaps)
        # The first call lacks at least the system prompt and tool schemas the Weka trace measured for this agent
        # (cl100k of the serialized prefix); the gap then only grows: each call adds text the provider counts higher.
        assert gaps[0] >= warm[path.stem.removeprefix("agent-")]
        assert gaps == sorted(gaps) and gaps[-1] > 1.8 * gaps[0]


def test_mini_swe_agent_include_discarded_replays_every_counted_call(tmp_path):
    for path in sorted((REAL / "mini-swe-agent-v2").glob("*.traj.json"))[:6]:
        data = json.loads(path.read_text())
        (plain,) = import_paths([path]).trajectories
        (full,) = import_paths([path], include_discarded=True).trajectories
        assert len(full.turns) == data["info"]["model_stats"]["api_calls"]
        assert len(full.turns) - len(plain.turns) == plain.header["source"].get("unrecorded_calls", 0)
        kept = [t for t in full.turns if not t.get("recorded", {}).get("discarded")]
        assert [t["output"] for t in kept] == [t["output"] for t in plain.turns]
        assert [t["recorded"] for t in kept] == [t["recorded"] for t in plain.turns]


def _lcp(a, b):
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def test_weka_block_text_reproduces_sizes_sharing_and_subagents(imported):
    result, _, workload = imported
    data = json.loads((REAL / "weka" / "sample_trace_with_subagent.json").read_text())
    by_path = _by_path(result, workload)
    trajs = by_path[str(REAL / "weka" / "sample_trace_with_subagent.json")]
    parent, subs = trajs[0], trajs[1:]
    assert not parent.subagent and all(s.subagent for s in subs)
    leaves = [r for r in data["requests"] if r["type"] != "subagent"]
    entries = [r for r in data["requests"] if r["type"] == "subagent"]
    convs = [(parent, leaves)] + [(s, e["requests"]) for s, e in zip(subs, entries, strict=True)]
    trace_reuse = [0, 0]
    mine = [0, 0]
    for traj, reqs in convs:
        assert len(traj.turns) == len(reqs)
        for k, (turn, r) in enumerate(zip(traj.turns, reqs, strict=True)):
            assert turn.output_tokens == r["out"]
            # Input sizes: exact when the tail absorbs the framing, else over by at most 4 per message + 3.
            assert r["in"] <= turn.prompt_tokens_est <= r["in"] + 4 * turn.context_len + 3
            shared = 64 * _lcp(reqs[k - 1]["hash_ids"], r["hash_ids"]) if k else 0
            trace_reuse[0] += shared
            trace_reuse[1] += r["in"]
            mine[0] += turn.reusable_prefix_tokens
            mine[1] += turn.prompt_tokens_est
    assert mine[0] / mine[1] == pytest.approx(trace_reuse[0] / trace_reuse[1], abs=0.01)
    # The parent call that finished before the subagents started spawns all four; its pause excludes them.
    spawning = [t for t in parent.turns if t.spawn]
    assert len(spawning) == 1 and [s.trajectory for s in spawning[0].spawn] == [s.id for s in subs]
    assert spawning[0].index == 2 and spawning[0].tool_time_s < spawning[0].recorded["recorded_gap_s"]


def test_weka_equal_ids_are_byte_identical_text(tmp_path):
    src = REAL / "weka" / "sample_trace_with_subagent.json"
    data = json.loads(src.read_text())
    subs = [r for r in data["requests"] if r["type"] == "subagent"]
    trajs = import_paths([src]).trajectories[1:]
    firsts = ["".join(m["content"] for m in t.turns[0]["append"]) for t in trajs]
    shared_ids = _lcp(subs[0]["requests"][0]["hash_ids"], subs[1]["requests"][0]["hash_ids"])
    assert shared_ids == 164  # the subagents share their first 164 blocks (tool + system prefix)
    a, b = (_ENC.encode(x) for x in firsts[:2])
    assert _lcp(a, b) >= 64 * shared_ids
    assert len(_ENC.encode(firsts[2])) >= 64 * len(subs[2]["requests"][0]["hash_ids"])
    # Same file, same salt: byte-identical output; another salt: other text, same sizes.
    again = import_paths([src]).trajectories[1:]
    assert [t.turns for t in again] == [t.turns for t in trajs]
    salted = import_paths([src], salt="x").trajectories[1]
    assert salted.turns[0]["append"][0]["content"] != trajs[0].turns[0]["append"][0]["content"]
    assert len(_ENC.encode(salted.turns[0]["append"][0]["content"])) == len(
        _ENC.encode(trajs[0].turns[0]["append"][0]["content"])
    )


def test_inspect_prints_pooled_reuse_matching_a_separate_count(imported, tmp_path):
    """`replay inspect` on an imported subset (one file per format) against a recount from the sources."""
    picks = [
        REAL / "swe-agent" / "ctf__crypto__eps.traj",
        next((REAL / "swe-agent").glob("*replace_from_source*")),
        REAL / "mini-swe-agent-v2" / "llm-ablation__gpt-5-mini__django__django-11133.traj.json",
        REAL / "openhands-v0" / "multi_swe_bench_output__ponylang__ponyc-4595.jsonl",
        REAL / "claude-code" / "agent-a87d76ff687e809e6.jsonl",
    ]
    reusable = prompt = 0
    for p in picks:
        if p.parent.name == "claude-code":
            ins, outs, _ = claude_calls(p)
        else:
            fmt = {"swe-agent": "swe-agent", "mini-swe-agent-v2": "mini-swe-agent", "openhands-v0": "openhands"}
            ins, outs = RECOUNT[fmt[p.parent.name]](p)
        pr, re_ = figures(ins, outs)
        reusable += sum(re_)
        prompt += sum(pr)
    out = tmp_path / "subset.jsonl"
    runner = CliRunner()
    res = runner.invoke(main, ["import", *map(str, picks), "-o", str(out), "-q"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(main, ["inspect", str(out), "--json"])
    assert res.exit_code == 0, res.output
    report = json.loads(res.output)
    assert report["prefix_reuse_pooled"] == pytest.approx(reusable / prompt, abs=0.01)
    assert [t["turns"] for t in report["trajectories"]] == [14, 13, 12, 23, 23]
    text_out = runner.invoke(main, ["inspect", str(out)]).output
    lines = text_out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("pooled:"))
    pooled_line = next(line for line in lines[start:] if "prefix reuse (replay's" in line)
    shown = float(pooled_line.split("pooled ")[1].split("%")[0]) / 100
    assert shown == pytest.approx(reusable / prompt, abs=0.01)
    # The same figures straight from the source files (imported on the fly).
    direct = json.loads(runner.invoke(main, ["inspect", *map(str, picks), "--json"]).output)
    assert direct["prefix_reuse_pooled"] == pytest.approx(report["prefix_reuse_pooled"], abs=1e-12)


@pytest.mark.parametrize(("folder", "published", "within"), [("mini-swe-agent-v2", 0.892, 0.002),
                                                             ("openhands-v0", 0.814, 0.002),
                                                             ("swe-agent", 0.895, 0.006)])  # fmt: skip
def test_reuse_by_the_readmes_definition_matches_the_readme(imported, folder, published, within):
    """The README's "prefix reuse (mean of per-traj means)", recomputed by replay inspect's second definition from
    the imported files (SWE-agent: 90.0 % from replay's rebuilt inputs, 89.5 % in the README from the originals)."""
    from replay.workload.char_reuse import char_prefix_reuse

    result, _, workload = imported
    by_path = _by_path(result, workload)
    ratios = [char_prefix_reuse(t) for path, ts in by_path.items() if f"/{folder}/" in path for t in ts]
    ratios = [r for r in ratios if r is not None]
    assert sum(ratios) / len(ratios) == pytest.approx(published, abs=within)
