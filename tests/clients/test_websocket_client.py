"""The WebSocket client (``--transport websocket``) against a scripted host: what it sends each turn (only the new
items on the socket that holds the last response, everything on another, again in full on
``previous_response_not_found``), both terminal events, error events classified as the HTTP refusals they stand for,
and a socket the host closed replaced (``reconnect``)."""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import WSMsgType, web

from replay.clients.client import make_client
from replay.clients.flavours.base import RequestOptions
from replay.clients.host import HostConfig
from replay.clients.transport import Transport
from replay.records.run_file import RequestRecord
from replay.workload.trajectory import Message


def _msg(role: str, content: str) -> Message:
    return Message(orjson.dumps({"role": role, "content": content}), 5, role=role)


def _events(rid: str, terminal: str, n: int = 3) -> list[dict[str, Any]]:
    usage = {"input_tokens": 7, "output_tokens": n, "input_tokens_details": {"cached_tokens": 0},
             "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 7 + n}  # fmt: skip
    out: list[dict[str, Any]] = [{"type": "response.created", "response": {"id": rid, "status": "in_progress"}}]
    out += [{"type": "response.output_text.delta", "item_id": "m", "output_index": 0, "content_index": 0,
             "delta": f"t{i} "} for i in range(n)]  # fmt: skip
    out.append({"type": terminal, "response": {"id": rid, "status": "completed", "usage": usage}})
    return out


class ScriptedHost:
    """A WebSocket host whose answer to each turn is scripted: ``plan`` holds, per turn, 'ok', 'done' (ends with
    response.done), 'not_found' (refuses a continuation), 'limit' (closes at its connection limit), '429' (an
    error event with a status) or 'quota' (an error event without one)."""

    def __init__(self, plan: list[str]) -> None:
        self.plan, self.seen, self.upgrades = plan, [], 0

    async def handle(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self.upgrades += 1
        async for msg in ws:
            if msg.type is not WSMsgType.TEXT:
                break
            body = orjson.loads(msg.data)
            self.seen.append(body)
            step = self.plan[len(self.seen) - 1] if len(self.seen) <= len(self.plan) else "ok"
            rid = f"resp_{len(self.seen)}"
            if step in ("ok", "done"):
                for event in _events(rid, "response.completed" if step == "ok" else "response.done"):
                    await ws.send_str(orjson.dumps(event).decode())
                continue
            error = {
                "not_found": (400, {"code": "previous_response_not_found", "message": "Previous response not found"}),
                "limit": (400, {"code": "websocket_connection_limit_reached", "message": "60 minutes"}),
                "429": (429, {"code": "rate_limit_exceeded", "message": "slow down"}),
                "quota": (None, {"code": "insufficient_quota", "message": "You exceeded your current quota"}),
            }[step]
            event = {"type": "error", "error": error[1]} | ({"status": error[0]} if error[0] else {})
            await ws.send_str(orjson.dumps(event).decode())
            if step == "limit":
                await ws.close()
                break
        return ws


async def _session(plan: list[str], turns: int, state: str = "previous") -> tuple[ScriptedHost, list[RequestRecord]]:
    host = ScriptedHost(plan)
    app = web.Application()
    app.router.add_get("/v1/responses", host.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    config = HostConfig(f"http://127.0.0.1:{port}/v1", "m", api="responses", transport="websocket")
    records = []
    try:
        async with Transport(config) as transport:
            client = make_client(config, RequestOptions("m", responses_state=state, transport="websocket"), transport)
            conversation = client.new_conversation()
            context = [_msg("system", "be brief"), _msg("user", "start")]
            for turn in range(turns):
                rec = RequestRecord(id=f"r{turn}", session=0, task=0, trajectory="t", turn=turn, max_tokens=3)
                body = client.render(context, 3, None, conversation)
                await client.call(body, rec, conversation, context)
                records.append(rec)
                context = [*context, _msg("assistant", "ok"), _msg("user", f"next {turn}")]
    finally:
        await runner.cleanup()
    return host, records


async def test_each_turn_sends_only_the_new_items_on_the_socket_that_holds_the_last_response():
    host, records = await _session(["ok", "done", "ok"], 3)
    assert all(r.error is None and r.status == 200 and r.output_tokens == 3 for r in records), records
    assert host.upgrades == 1 and records[0].connect_s is not None and records[1].connect_s is None
    first, second, third = host.seen
    assert first["type"] == "response.create" and "stream" not in first and first["store"] is False
    assert first["metadata"] == {"replay_request_id": "r0"} and "previous_response_id" not in first
    assert len(first["input"]) == 2
    # a turn continues the last response (resp_1, then resp_2, which ended with response.done) with the new item
    # (the host holds its own answer: the recorded one is not sent)
    assert second["previous_response_id"] == "resp_1" and len(second["input"]) == 1
    assert third["previous_response_id"] == "resp_2" and len(third["input"]) == 1
    assert [r.served["id"] for r in records] == ["resp_1", "resp_2", "resp_3"]


async def test_previous_response_not_found_sends_the_whole_context_again():
    host, records = await _session(["ok", "not_found", "ok"], 2)
    assert all(r.error is None for r in records)
    refused, again = host.seen[1], host.seen[2]
    assert refused["previous_response_id"] == "resp_1" and len(refused["input"]) == 1
    assert "previous_response_id" not in again and len(again["input"]) == 4  # the whole context
    assert records[1].retries == 1 and records[1].reconnect is None and host.upgrades == 1


async def test_the_connection_limit_is_met_by_a_new_socket_with_the_whole_context():
    host, records = await _session(["ok", "limit", "ok", "ok"], 3)
    assert all(r.error is None for r in records), [r.error_detail for r in records]
    assert host.upgrades == 2
    assert records[1].reconnect == "websocket_connection_limit_reached" and records[1].connect_s is not None
    assert "previous_response_id" not in host.seen[2] and len(host.seen[2]["input"]) == 4
    assert host.seen[3]["previous_response_id"] == "resp_3"  # the new socket holds the resent turn's response
    assert records[2].reconnect is None


async def test_error_events_are_classified_like_the_http_refusals_they_stand_for():
    host, records = await _session(["429", "quota"], 2, state="none")
    assert (records[0].status, records[0].error) == (429, "http_429")
    assert (records[1].status, records[1].error) == (429, "quota_exhausted")
    assert "slow down" in records[0].error_detail and records[0].output_events == 0
    assert all(len(body["input"]) == 2 + 2 * i for i, body in enumerate(host.seen))  # no continuation asked


async def test_a_refused_upgrade_is_classified_by_its_status():
    """A host without the WebSocket mode (404 at the upgrade) or refusing the key (401): a classified record."""

    async def refuse(request: web.Request) -> web.Response:
        return web.json_response({"error": "no"}, status=401)

    app = web.Application()
    app.router.add_get("/v1/responses", refuse)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    config = HostConfig(f"http://127.0.0.1:{port}/v1", "m", api="responses", transport="websocket")
    try:
        async with Transport(config) as transport:
            client = make_client(config, RequestOptions("m", transport="websocket"), transport)
            rec = RequestRecord(id="r", session=0, task=0, trajectory="t", turn=0, max_tokens=3)
            context = [_msg("user", "start")]
            await client.call(client.render(context, 3, None), rec, None, context)
    finally:
        await runner.cleanup()
    assert (rec.status, rec.error) == (401, "http_4xx") and "WebSocket upgrade (401)" in rec.error_detail
