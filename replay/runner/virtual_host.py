"""The simulated host in this process, for the virtual clock: the engine ``replay sim`` runs (``EngineCore`` stepped by
``SimEngine``) on the run's own event loop, and a client with ``HostClient``'s face that hands it each call directly.

It is sent what the simulated host would be sent (the chat messages' prompt token ids, by the server's tokenising
rules; ``max_tokens``; ``ignore_eos`` and ``min_tokens`` with ``--force-output-length``), refuses what it refuses
(prompt and answer over the context: a 400 ``context_overflow``; a full waiting queue: a 503), and fills the same
``RequestRecord`` the client fills from the server's stream: sent, headers, every token's time (the end of the engine
step that sampled it), first token, first answer token (after the reasoning tokens), the usage the server reports,
the route and model it names, the answer's text (the server's words, for live history). No HTTP, no bytes, no
faults, dialects or fallback routes: those are the server's, and a run that asks for them runs in real time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from types import TracebackType
from typing import Any

from replay import clock
from replay.clients.answer_check import answer_check
from replay.clients.errors import http_error_class
from replay.clients.flavours.base import Conversation
from replay.clients.usage import excerpt
from replay.records.run_file import RequestRecord
from replay.sim.core.engine import FINISHED, EngineCore, Seq, SimEngine, Step
from replay.sim.core.profiles import SimProfile
from replay.sim.core.prompt import WireIds
from replay.sim.server.dialect_base import Dialect
from replay.sim.server.errors import error_body, overflow_body
from replay.sim.wire.openai import piece_text
from replay.workload.trajectory import Message

PRIMARY = "primary"  # the route the simulated host names when it has no fallback


class VirtualHost:
    """The engine of ``profile`` (or a kept ``core``, its cache too) for one run on the virtual clock; used as the
    run's transport (``async with``: the engine's loop starts and stops with the run) and as its client."""

    def __init__(self, profile: SimProfile, model: str, prompts: WireIds | None = None, core: EngineCore | None = None,
                 seed: int = 0, force_output_length: bool = False) -> None:  # fmt: skip
        if profile.instant:
            raise ValueError(f"profile {profile.name!r} has no step time: the virtual clock would never move")
        self.profile, self.model = profile, model
        self.core = core if core is not None else EngineCore(profile, seed)
        self.prompts = prompts if prompts is not None else WireIds()
        self.force = force_output_length
        self.engine: SimEngine | None = None
        self._calls: dict[Seq, tuple[list[float], asyncio.Future[None]]] = {}
        self._dialect = Dialect()

    async def __aenter__(self) -> VirtualHost:
        self.engine = SimEngine(self.profile, clock=clock.now, core=self.core, on_step=self._stepped)
        return self

    async def __aexit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        if self.engine is not None:
            await self.engine.stop()

    def _stepped(self, step: Step, t_end: float) -> None:
        """Each sequence's new token is stamped with the step's end; a finished one's call returns."""
        calls = self._calls
        for seq, _ in step.items:
            call = calls.get(seq)
            if call is None:
                continue
            times, done = call
            if seq.num_output > len(times):
                times.append(t_end)
            if seq.state == FINISHED:
                del calls[seq]
                done.set_result(None)

    # --- the client's face (what sessions use of HostClient) ------------------------------------------------
    def render(self, context: Sequence[Message], max_tokens: int, tools: list[dict[str, Any]] | None,
               conversation: Conversation | None = None) -> Any:  # fmt: skip
        return list(context), max_tokens  # the messages themselves: the engine is sent their token ids

    def new_conversation(self) -> Conversation | None:
        return None

    async def warm(self, connections: int) -> None:
        """No connections to open."""

    async def call(self, body: Any, rec: RequestRecord, conversation: Conversation | None = None,
                   context: Sequence[Message] = (), collect: bool = False,
                   tools: Sequence[dict[str, Any]] | None = None) -> dict[str, Any] | None:  # fmt: skip
        """One call: ``rec`` filled as the client fills it from the simulated host's stream; the answer's text with
        ``collect``. On cancellation the engine drops the call and ``rec`` keeps what was sampled."""
        messages, max_tokens = body
        t = clock.now()
        rec.t_call = t if rec.t_call is None else rec.t_call
        rec.t_sent = rec.t_headers = t
        ids = self.prompts.prompt_ids(messages)
        target, reason = self.core.plan_output(max_tokens, self.force, max_tokens if self.force else 0)
        refused = self._refusal(len(ids), target, rec.id)
        if refused is not None:
            status, text = refused
            rec.status, rec.t_done = status, t
            rec.error, rec.error_detail = http_error_class(status, text), excerpt(text)
            rec.headers = self._headers(rec)
            return None
        assert self.engine is not None, "a virtual host is used inside `async with`"
        rec.status, rec.headers = 200, self._headers(rec)  # the server answers its headers at once
        seq = self.core.new_seq(rec.id, ids, target, reason)
        times: list[float] = []
        done = asyncio.get_running_loop().create_future()
        self._calls[seq] = (times, done)
        self.engine.submit(seq)
        try:
            await done
        except asyncio.CancelledError:
            self._calls.pop(seq, None)
            self.engine.abort(seq)
            self._fill(rec, seq, times)
            rec.error, rec.error_detail = "cancelled", "stopped before the host finished"
            raise
        self._fill(rec, seq, times)
        if not collect:
            return None
        r = min(seq.reasoning, len(times))
        return {"content": piece_text(r, len(times) - r), "reasoning": piece_text(0, r)}

    def _refusal(self, prompt: int, target: int, rid: str) -> tuple[int, bytes] | None:
        """The status and body the simulated host answers a call it does not admit with, else None."""
        limit = self.profile.model_len_limit
        if prompt + target > limit:
            return 400, overflow_body("chat", self._dialect, limit, prompt, target, rid)
        if self.profile.max_waiting and len(self.core.waiting) >= self.profile.max_waiting:
            return 503, error_body("chat", self._dialect, 503, "the waiting queue is full", rid)
        return None

    def _headers(self, rec: RequestRecord) -> dict[str, str]:
        return {"x-request-id": rec.id, "x-replay-route": PRIMARY}

    def _fill(self, rec: RequestRecord, seq: Seq, times: list[float]) -> None:
        """What the client reads from the stream: each token an event of its own, at its step's end."""
        t_sent, n = rec.t_sent, len(times)
        rec.t_done = times[-1] if n and seq.state == FINISHED else clock.now()
        if not n:
            return
        r = min(seq.reasoning, n)
        rec.served = {"model": self.model, "id": f"chatcmpl-{rec.id}"}
        rec.t_first_token, rec.t_last_token = times[0], times[-1]
        rec.t_first_answer = times[r] if r < n else None
        rec.output_events = n
        chunks: list[float] = []
        for t in times:
            chunks += (round((t - t_sent) * 1e6) / 1e6, 1)  # to the µs, as the client's reader rounds
        rec.chunks = chunks
        if seq.state != FINISHED:
            return
        rec.finish_reason = seq.finish_reason
        rec.prompt_tokens, rec.cached_tokens = seq.prompt_len, seq.cached_tokens or 0
        rec.output_tokens, rec.reasoning_tokens = n, r
        # the client's free answer checks (clients.answer_check): the served length against the asked one; no text
        # is read on the virtual clock, and its answers call no tools
        rec.length_asked, rec.length_served = rec.max_tokens, n
        rec.answer_check = answer_check(rec.max_tokens, n, rec.finish_reason, None, [], None,
                                        answered=rec.t_first_answer is not None)  # fmt: skip
