"""A host whose tool calling is off (vLLM without --enable-auto-tool-choice --tool-call-parser) refuses every call
that carries tools with a 400: classed ``tools_refused``, and the report points at what fixes it, the host's flags
or ``--tool-calls text``, with which the same workload is answered."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from aiohttp import web
from click.testing import CliRunner

from replay.cli import main
from replay.clients.errors import http_error_class
from tests.support.hostile import answer, threaded_host
from tests.support.trajectories import simple_turns, write_trajectory

VLLM = (b'{"object":"error","message":"\\"auto\\" tool choice requires --enable-auto-tool-choice and'
        b' --tool-call-parser to be set","type":"BadRequestError","param":null,"code":400}')  # fmt: skip
LLAMA = b'{"error":{"code":500,"message":"tools param requires --jinja flag","type":"server_error"}}'
TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object", "properties": {}}}}]


@pytest.mark.parametrize("body", [VLLM, LLAMA])
def test_tool_refusals_as_the_engines_word_them(body: bytes) -> None:
    assert http_error_class(400, body) == "tools_refused"
    assert http_error_class(400, b'{"error":{"message":"tools must be a list"}}') == "http_4xx"


async def _vllm_without_tool_flags(request: web.Request) -> web.StreamResponse:
    body = orjson.loads(await request.read())
    if body.get("tools"):
        return web.Response(status=400, body=VLLM, content_type="application/json")
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    for part in answer("chat"):
        await resp.write(part)
    await resp.write_eof()
    return resp


def _run(tmp_path: Path, url: str, name: str, *more: str) -> tuple[dict, list[dict], str]:
    work = tmp_path / "w.jsonl"
    if not work.exists():
        for i in range(2):
            write_trajectory(work, f"w{i}", simple_turns(3, output_tokens=3), tools=TOOLS)
    out = tmp_path / f"{name}.jsonl"
    args = ["run", str(work), "--host", url, "--model", "m", "-c", "2", "--tool-time", "none", "--out", str(out), "-q"]
    live = CliRunner().invoke(main, [*args, *more, "--json"])
    records = [r for line in out.read_bytes().splitlines() if (r := orjson.loads(line))["type"] == "request"]
    text = CliRunner().invoke(main, ["report", str(out)]).output
    offline = orjson.loads(CliRunner().invoke(main, ["report", str(out), "--json"]).stdout)
    summary = orjson.loads(live.stdout)
    assert summary["errors_by_class"] == offline["errors_by_class"]  # live == offline
    return summary, records, text


def test_a_host_without_tool_calling_is_named_with_the_way_round_it(tmp_path: Path) -> None:
    with threaded_host({"/v1/chat/completions": _vllm_without_tool_flags}) as url:
        native, records, text = _run(tmp_path, url, "native")
        flat, flat_records, flat_text = _run(tmp_path, url, "text", "--tool-calls", "text")
    assert records and {(r["status"], r["error"]) for r in records} == {(400, "tools_refused")}  # the raw records
    assert native["errors_by_class"] == {"tools_refused": len(records)}
    assert "--tool-calls text" in text and "--enable-auto-tool-choice" in text and "--tool-call-parser NAME" in text
    assert flat_records and all(r["error"] is None for r in flat_records) and flat["errors"] == 0
    assert "tools_refused" not in flat_text
