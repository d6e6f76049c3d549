"""A host client: one flavour over the shared transport, turning a call into exactly one filled record.

Sessions hand it messages and get a record back; whatever the host sends, the call ends as a success only when its
stream was understood to its end, and otherwise as one classified error (``replay.clients.errors``), never as an
exception. The API key is scrubbed from everything the host sends back before it reaches a record.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from time import perf_counter
from typing import Any, Protocol

import aiohttp

from replay.clients import provider_fields
from replay.clients import ws_transport as ws
from replay.clients.affinity import Affinity
from replay.clients.answer_check import ToolCall, answer_check
from replay.clients.body import Body
from replay.clients.encodings import EncodingError, decoded
from replay.clients.errors import http_error_class
from replay.clients.flavours.anthropic import AnthropicFlavour
from replay.clients.flavours.base import Conversation, Flavour, RequestOptions
from replay.clients.flavours.chat import ChatFlavour
from replay.clients.flavours.completions import CompletionsFlavour
from replay.clients.flavours.responses import ResponsesFlavour
from replay.clients.host import HostConfig
from replay.clients.interpreter import STEP_BYTES, interpreter
from replay.clients.stream import StreamState, interpret, interpret_steps
from replay.clients.transport import ERROR_BODY_LIMIT, Received, Transport
from replay.clients.usage import excerpt
from replay.clients.watchdog import MAX_HOPS, redirect_target, same_origin
from replay.records.run_file import RequestRecord
from replay.records.scrub import Scrubber, header_secrets
from replay.workload.trajectory import Message

FLAVOURS: dict[str, type[Flavour]] = {
    "chat": ChatFlavour,
    "completions": CompletionsFlavour,
    "responses": ResponsesFlavour,
    "anthropic": AnthropicFlavour,
}


def make_flavour(api: str, options: RequestOptions) -> Flavour:
    try:
        return FLAVOURS[api](options)
    except KeyError:
        raise ValueError(f"unknown API flavour {api!r}; expected one of {', '.join(FLAVOURS)}") from None


class ModelClient(Protocol):
    """What sessions use of a client: ``HostClient`` over HTTP, or the virtual clock's host in this process
    (``replay.runner.virtual_host``). A call fills one record, whatever happens."""

    def render(self, context: Sequence[Message], max_tokens: int, tools: list[dict[str, Any]] | None,
               conversation: Conversation | None = None) -> Any: ...  # fmt: skip

    def new_conversation(self) -> Conversation | None: ...

    async def warm(self, connections: int) -> None: ...

    async def call(self, body: Any, rec: RequestRecord, conversation: Conversation | None = None,
                   context: Sequence[Message] = (), collect: bool = False,
                   tools: Sequence[dict[str, Any]] | None = None) -> dict[str, Any] | None: ...  # fmt: skip


class HostClient:
    """Renders requests in one flavour and sends them over one transport."""

    def __init__(self, host: HostConfig, flavour: Flavour, transport: Transport) -> None:
        self.host = host
        self.flavour = flavour
        self.transport = transport
        self.url = host.base_url.rstrip("/") + flavour.path
        self._key = host.api_key()
        self._scrubber = Scrubber([self._key or "", *header_secrets(host.headers)])  # whatever the host echoes
        self.affinity = Affinity(flavour.session_body, host.headers)  # {session}/{task} fields, filled per call
        fixed = {k: v for k, v in host.headers.items() if k not in self.affinity.header_names}
        self._headers = {**flavour.headers(self._key), **fixed}
        self.inflight = 0  # calls between send and end, for the speed-by-load figure (records' ``inflight``)
        self.ws_url = ws.ws_url(host.base_url) if host.transport == "websocket" else None
        self._ws_metadata = "metadata" not in flavour.options.extra_body

    def render(
        self,
        context: Sequence[Message],
        max_tokens: int,
        tools: list[dict[str, Any]] | None,
        conversation: Conversation | None = None,
    ) -> Body:
        return self.flavour.body(context, max_tokens, tools, conversation)

    def new_conversation(self) -> Conversation | None:
        return self.flavour.new_conversation()

    async def warm(self, connections: int) -> None:
        if self.ws_url is not None and self.transport.sockets is not None:
            await self.transport.sockets.warm(self.ws_url, self._headers, connections)
            return
        await self.transport.warm(self.host.base_url.rstrip("/") + "/models", self._headers, connections)

    async def call(
        self,
        body: Body | bytes,
        rec: RequestRecord,
        conversation: Conversation | None = None,
        context: Sequence[Message] = (),
        collect: bool = False,
        tools: Sequence[dict[str, Any]] | None = None,
    ) -> dict[str, Any] | None:
        """Send one request and fill ``rec``; on cancellation ``rec`` still holds what was seen. With ``collect``,
        returns the host's answer text (for live history). ``tools``: those the request declared (answer checks)."""
        got = Received()
        headers = {**self._headers, "X-Request-Id": rec.id}
        if self.affinity:
            body = self.affinity.body(body, rec.session, rec.task)
            headers.update(self.affinity.headers(rec.session, rec.task))
        self.inflight += 1
        rec.inflight = self.inflight
        try:
            if self.ws_url is not None:
                await self._ws_post(rec, got, conversation, context, tools)
            else:
                await self.transport.post(self.url, body, headers, rec, got)
        except asyncio.CancelledError:
            self._fill(rec, got, interpret(self.flavour, got.reads, got.times, rec.t_sent))
            raise
        finally:
            self.inflight -= 1
        if rec.status is not None and rec.status != 200 and rec.error is None:
            rec.error = http_error_class(rec.status, got.refusal)
            text = got.refusal.decode("utf-8", "replace")
            detail = self._redirect(rec, got) if rec.error == "redirect" else text
            if rec.error == "protocol":  # a 2xx other than 200: no stream to read
                detail = f"the host answered {rec.status} to a streamed call, with no stream" + f": {text}" * bool(text)
            rec.error_detail = excerpt(self._scrub(detail))  # scrubbed before it is cut: no key's start is left
            self._headers_to(rec, got)
            self.flavour.after_call(conversation, None, context)
            return None
        options = self.flavour.options
        read_text = collect or options.check_answers == "all" or options.keep_answers
        if got.encoding is not None:  # compressed although asked for identity: decoded, read by read
            try:
                got.reads, got.times = decoded(got.reads, got.times, got.encoding, self.host.max_response_bytes)
            except EncodingError as exc:
                rec.error = rec.error or "malformed_stream"
                rec.error_detail = rec.error_detail or str(exc)
        st = await self._interpret(got, rec, read_text)
        self._fill(rec, got, st)
        if rec.error is None:
            self._judge(rec, st, tools)
        self.flavour.after_call(conversation, st if rec.error is None else None, context)
        if collect and st.text is not None:
            answer = {"content": "".join(st.text), "reasoning": "".join(st.reasoning_text or ())}
            return answer | ({"tool_calls": st.tool_calls()} if st.calls else {})
        return None

    async def _ws_post(self, rec: RequestRecord, got: Received, conversation: Conversation | None,
                       context: Sequence[Message], tools: Sequence[dict[str, Any]] | None) -> None:  # fmt: skip
        """One turn over the lane's WebSocket (``replay.clients.ws_transport``): the body rendered for that socket
        (only the new items when it holds the conversation's last response), sent again once, in full, on
        ``previous_response_not_found``, and once on a new socket when the host closed this one (its connection
        limit, or closed before answering: not with --retries 0, as for HTTP's stale connections)."""
        sockets = self.transport.sockets
        assert sockets is not None and self.ws_url is not None
        rec.t_call = rec.t_call if rec.t_call is not None else perf_counter()
        want = conversation.previous_id if conversation is not None else None
        listed = tools if isinstance(tools, list) else None
        resent = False
        while True:
            try:
                sock = await sockets.acquire(self.ws_url, self._headers, rec, want)
            except (aiohttp.ClientError, OSError, TimeoutError) as exc:
                ws.connect_error(exc, rec)
                if rec.status is not None:  # a refused upgrade: classified by its status, its words the detail
                    got.refusal = (rec.error_detail or "").encode()
                rec.t_sent = rec.t_done = perf_counter()
                return
            continues = want is not None and sock.last_id == want
            body: Body | bytes = self.flavour.body(context, rec.max_tokens, listed, conversation if continues else None)
            if self.affinity:
                body = self.affinity.body(body, rec.session, rec.task)
            turn = ws.Turn([], [])
            try:
                await ws.exchange(sock, ws.frame(bytes(body), rec.id, self._ws_metadata), rec, self.host, turn)
            except asyncio.CancelledError:
                got.reads, got.times = ws.as_sse(turn.messages), turn.times
                await asyncio.shield(sockets.release(rec.session, sock, None, "the run stopped mid-turn"))
                raise
            first = turn.end == "error" and len(turn.messages) == 1  # the host refused the turn before answering
            again = (first and turn.code == ws.NOT_FOUND_CODE and continues) or (first and turn.code == ws.LIMIT_CODE)
            stale = turn.closed is not None and not turn.messages and rec.error is None and self.host.resend_stale
            if not resent and (again or stale):
                why = ws.LIMIT_CODE if turn.code == ws.LIMIT_CODE else turn.closed
                await sockets.release(rec.session, sock, None, why if why else None)
                resent, want = True, None  # the new socket (or this one, lacking it) holds no state: all of it
                rec.retries += 1
                rec.notes = [*(rec.notes or []), f"sent again in full ({turn.code or turn.closed})"][:10]
                continue
            break
        got.reads, got.times = ws.as_sse(turn.messages), turn.times
        if first and turn.status is not None:  # classified like the HTTP refusal it stands for
            rec.status, got.refusal = turn.status, turn.messages[0][:ERROR_BODY_LIMIT]
        else:
            rec.status = 200 if turn.messages else None
            if turn.closed is not None and rec.error is None and turn.end is None:
                rec.error = "disconnect" if turn.messages else "connect"
                rec.error_detail = excerpt(turn.closed)
        done = turn.end in ("response.completed", "response.incomplete", "response.done")
        await sockets.release(rec.session, sock, turn.response_id if done else None, ws.broken(turn, rec))

    async def _interpret(self, got: Received, rec: RequestRecord, collect: bool) -> StreamState:
        """The stream's figures, read in slices by the loop's interpreter between its other work
        (``replay.clients.interpreter``): streams ending together never hold the loop."""
        steps = interpret_steps(self.flavour, got.reads, got.times, rec.t_sent, collect, STEP_BYTES)
        try:
            return await interpreter().submit(steps)
        except asyncio.CancelledError:  # the run is stopping: the record still gets what the stream said
            self._fill(rec, got, interpret(self.flavour, got.reads, got.times, rec.t_sent, collect))
            raise

    def _fill(self, rec: RequestRecord, got: Received, st: StreamState) -> None:
        rec.t_first_token, rec.t_first_answer, rec.t_last_token = st.first_token, st.first_answer, st.last_token
        rec.output_events, rec.chunks, rec.finish_reason = st.events, st.chunks, st.finish_reason
        rec.length_asked, rec.length_served = rec.max_tokens, st.usage.output if st.usage is not None else None
        u = st.usage
        if u is not None:
            rec.prompt_tokens, rec.cached_tokens, rec.cache_write_tokens = u.prompt, u.cached, u.cache_write
            rec.output_tokens, rec.reasoning_tokens = u.output, u.reasoning
            if u.problem:
                rec.usage_raw = self._scrub(u.raw or "")
        if st.timings is None:
            st.timings = provider_fields.header_timings(got.headers, st.notes)
        rec.server_timings = st.timings
        rec.speculation = provider_fields.speculation(st)
        notes = [f"redirected ({hop}): the answer came from there" for hop in got.redirects] + st.notes
        if notes:
            rec.notes = [self._scrub(note) for note in notes[:10]]
        if st.served or st.response_id:
            rec.served = {**st.served, **({"id": st.response_id} if st.response_id else {})}
        self._headers_to(rec, got)
        if rec.error is not None:
            return
        failed = self.flavour.outcome(st, b"" if st.ended else self._tail(got))
        if failed is not None:
            rec.error, detail = failed
            rec.error_detail = self._scrub(detail)

    def _judge(self, rec: RequestRecord, st: StreamState, tools: Sequence[dict[str, Any]] | None) -> None:
        """The answer checks, once the stream is read: off the per-read path, a few microseconds a call unless the
        text is checked too (docs/benchmarks.md)."""
        options = self.flavour.options
        text = "".join(st.text) if st.text is not None else None
        if options.check_answers != "off":
            calls = [ToolCall(c["name"], "".join(c["pieces"])) for c in (st.calls or {}).values()]
            rec.answer_check = answer_check(rec.max_tokens, rec.output_tokens, rec.finish_reason,
                                            text if options.check_answers == "all" else None, calls, tools,
                                            answered=st.first_answer is not None)  # fmt: skip
        if options.keep_answers:
            rec.answer_text = self._scrub(text) if text is not None else None
            if st.calls:  # each string scrubbed: a host may echo a key anywhere
                rec.answer_calls = [self._scrubbed_call(c) for c in st.tool_calls()]

    def _scrubbed_call(self, call: dict[str, Any]) -> dict[str, Any]:
        """A tool call of the answer as its record keeps it (``answer_calls``), every string scrubbed."""
        fn = call["function"]
        named = {"name": self._scrub(str(fn.get("name") or "")), "arguments": self._scrub(fn["arguments"])}
        return {"id": self._scrub(str(call.get("id") or "")), "type": "function", "function": named}

    def _redirect(self, rec: RequestRecord, got: Received) -> str:
        """What a redirect that was not followed pointed to, and why it was not."""
        target = redirect_target(self.url, got.location)
        if target is None:
            return f"the host answered {rec.status} without a Location"
        if not self.host.follow_redirects:
            why = "not followed: --follow-redirects follows one within the host's origin"
        elif not same_origin(self.url, target):
            why = "not followed: another origin (the key never leaves the host it was given for)"
        else:
            why = f"not followed: more than {MAX_HOPS} redirects"
        return f"the host answered {rec.status}, to {excerpt(target, 200)} ({why})"

    @staticmethod
    def _tail(got: Received) -> bytes:
        return got.reads[-1][-200:] if got.reads else b""

    def _headers_to(self, rec: RequestRecord, got: Received) -> None:
        if got.headers:
            rec.headers = {k: self._scrub(v) for k, v in got.headers.items()}

    def _scrub(self, text: str) -> str:
        """No secret reaches a record, even when a host echoes it back (encoded, or cut: ``records.scrub``)."""
        return self._scrubber.text(text) if self._scrubber else text


def make_client(host: HostConfig, options: RequestOptions, transport: Transport) -> HostClient:
    """The client for ``host`` in its flavour, over ``transport``."""
    return HostClient(host, make_flavour(host.api, options), transport)
