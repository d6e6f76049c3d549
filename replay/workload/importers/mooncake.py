"""Mooncake traces (JSON Lines: ``timestamp`` ms, ``input_length``, ``output_length``, ``hash_ids``).

Each line is one request; ``hash_ids`` name its ``block_size``-token blocks (512 in the published traces),
the last one partial when ``input_length`` is not a multiple. Text is generated per block id (see
``_blocks``): equal ids are byte-identical text, input sizes match ``input_length``.

The trace has no session ids. Requests are grouped into conversations by prefix: a request joins the
conversation whose latest request's full blocks are all a prefix of its own ids (the longest such), else
it starts a new one. This is a heuristic: two conversations that share exactly a whole earlier request
(e.g. a bare system prompt) are merged. Arrival times are kept as ``recorded.arrival_s``; tool time is not
recorded (0; the header says so).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from replay.workload.importers._blocks import BlockRequest, BlockText, block_calls
from replay.workload.importers._delta import Imported, build_trajectory
from replay.workload.importers._sessions import PrefixSessions
from replay.workload.importers._source import Refused, Src, iter_jsonl

FORMAT = "mooncake"
DEFAULT_BLOCK_SIZE = 512


def import_file(path: Path, salt: str = "", block_size: int = DEFAULT_BLOCK_SIZE) -> list[Imported]:
    src = Src(path)
    sessions: list[list[BlockRequest]] = []
    extending = PrefixSessions(lambda block_id: block_id)  # a request extends its session's last full blocks
    for lineno, obj in iter_jsonl(path):
        s = src.at(lineno)
        s.expect(obj, dict, "$", "a Mooncake request object")
        ids = s.get(obj, "hash_ids", list, "$", "a list of block hash ids")
        n_in = s.get(obj, "input_length", int, "$", "the input length in tokens (an integer)")
        n_out = s.get(obj, "output_length", int, "$", "the output length in tokens (an integer)")
        full = n_in // block_size
        if len(ids) not in (full, -(-n_in // block_size)):
            raise s.fail(
                "$.hash_ids",
                f"expected {full} or {-(-n_in // block_size)} ids for input_length {n_in} with {block_size}-token "
                f"blocks (--block-size); got {len(ids)}",
            )
        blocks = [(h, block_size) for h in ids[:full]]
        if len(ids) > full:
            blocks.append((ids[-1], n_in - full * block_size))
        rec: dict[str, Any] = {"output_tokens": n_out, "trace_input_tokens": n_in}
        if isinstance(obj.get("timestamp"), (int, float)):
            rec["arrival_s"] = obj["timestamp"] / 1000.0
        req = BlockRequest(blocks=blocks, input_tokens=n_in, output_tokens=n_out, tool_time_s=None, recorded=rec)
        target = extending.match(ids[:full])
        if target is None:
            target = len(sessions)
            sessions.append([])
        sessions[target].append(req)
        extending.expect(target, list(ids[:full]))
    if not sessions:
        raise Refused(path, "", "no requests in the trace")
    texts = BlockText(salt)
    stem = path.name.removesuffix(".jsonl")
    out = []
    width = len(str(len(sessions)))
    for n, reqs in enumerate(sessions):
        traj_id = f"mooncake/{stem}/{n:0{width}d}"
        calls, worst = block_calls(reqs, texts, key=traj_id, block_size=block_size)
        source = {
            "importer": FORMAT,
            "path": str(path),
            "tool_time": "none recorded (arrival times only, kept as recorded.arrival_s)",
            "text": "synthetic: one word per cl100k token, generated per block hash id",
            "block_size": block_size,
            "prompt_tokens_over_trace": worst,
        }
        out.append(build_trajectory(traj_id, calls, source=source))
    return out
