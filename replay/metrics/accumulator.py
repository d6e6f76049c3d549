"""The raw material of every figure, gathered one request at a time: the summary without keeping the requests.

A run's summary used to be made from the list of all its records; a soak of hours cannot hold that list. An
``Accumulator`` takes each request as it comes (``add``), keeps only counts, sums and HdrHistograms (fixed memory,
3 significant digits, exact merging), and turns into the same figures at the end (``figures``). Accumulators of
parts of a run (the windows of a soak, the workers of a sharded run) merge exactly (``merge``) and travel as JSON
(``encode``/``decode``), so a run file's window records rebuild the run's summary, and any span of it.

Which requests a figure covers is the caller's call: ``measured`` says a request counts in the per-call figures
(successful, sent in the steady window), and ``token_key`` names where its tokens go (for the summary: inside the
steady window or not; for a window record: which window and phase each token fell in).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Hashable
from typing import Any

from replay.histogram import Histogram
from replay.metrics.answer_tally import AnswerTally
from replay.metrics.client_pauses import PauseTally, record_itl
from replay.metrics.concurrency import LaneTally
from replay.metrics.goodput import CallSlo, GoodputTally
from replay.metrics.host.host_tally import HostTally
from replay.metrics.recipes.recipe_tally import RecipeTally, decode_tps
from replay.metrics.task_figures import TaskTally
from replay.records.run_file import RequestRecord, TaskRecord

US = 1_000_000  # seconds → microseconds for latency histograms
TPS_SCALE = 1000  # tokens/s → milli-tokens/s for speed histograms
HISTOGRAMS = ("ttft", "ttfat", "e2e", "itl", "decode", "with_wait", "send_wait")
K = 1024
CONTEXT_EDGES = (0, 8 * K, 32 * K, 64 * K, 128 * K)  # prompt tokens, [low, high); the vendors' "8k" is 8 × 1024
CONTEXT_LABELS = ("<8k", "8-32k", "32-64k", "64-128k", ">=128k")
TURN_EDGES = (0, 1, 2, 4, 8, 16, 32, 64)  # turn index: powers of two, so early turns keep their own rows
TURN_LABELS = ("0", "1", "2-3", "4-7", "8-15", "16-31", "32-63", ">=64")
_SUMS = ("requests", "ok", "retries", "errors", "invalid_usage", "finals", "finals_failed", "prompt_tokens",
         "cached_tokens", "output_tokens", "reasoning_tokens", "prompt_tokens_est", "reusable_prefix_tokens",
         "measured", "m_est", "m_reusable", "m_reported", "m_host_prompt", "m_host_cached",
         "m_prompt_reported", "m_reported_est", "m_reported_reusable")  # fmt: skip


def new_histogram() -> Histogram:
    return Histogram()


def token_scale(r: RequestRecord) -> float:
    """Tokens per streamed event: 1 unless the host's usage says events carried more (or fewer)."""
    if r.output_tokens and r.output_events:
        return r.output_tokens / r.output_events
    return 1.0


class _Bucket:
    """One row of a breakdown: the per-call figures of the calls in it."""

    __slots__ = ("decode", "est", "host_cached", "host_prompt", "reported", "reported_est", "reported_reusable",
                 "requests", "reusable", "ttft")  # fmt: skip

    def __init__(self) -> None:
        self.requests = self.est = self.reusable = self.reported = self.host_prompt = self.host_cached = 0
        self.reported_est = self.reported_reusable = 0  # the client's counts over the calls the host reported
        self.ttft, self.decode = new_histogram(), new_histogram()

    def add(self, r: RequestRecord, speed: float | None) -> None:
        """One measured call; ``speed``: its ``decode_tps`` (worked out once for its two rows and the whole)."""
        self.requests += 1
        self.est += r.prompt_tokens_est
        self.reusable += r.reusable_prefix_tokens
        if r.prompt_tokens is not None and r.cached_tokens is not None:
            self.reported += 1
            self.host_prompt += r.prompt_tokens
            self.host_cached += r.cached_tokens
            self.reported_est += r.prompt_tokens_est
            self.reported_reusable += r.reusable_prefix_tokens
        if r.t_first_token is not None:
            self.ttft.record_clipped((r.t_first_token - r.t_sent) * US)
        if speed is not None:
            self.decode.record_clipped(speed * TPS_SCALE)

    def merge(self, other: _Bucket) -> None:
        for name in ("requests", "est", "reusable", "reported", "host_prompt", "host_cached", "reported_est",
                     "reported_reusable"):  # fmt: skip
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.ttft.add(other.ttft)
        self.decode.add(other.decode)

    def encode(self) -> list[Any]:
        return [self.requests, self.est, self.reusable, self.reported, self.host_prompt, self.host_cached,
                _enc(self.ttft), _enc(self.decode), self.reported_est, self.reported_reusable]  # fmt: skip

    @classmethod
    def decode_from(cls, data: list[Any]) -> _Bucket:
        b = cls()
        b.requests, b.est, b.reusable, b.reported, b.host_prompt, b.host_cached = data[:6]
        b.ttft, b.decode = _dec(data[6]), _dec(data[7])
        # written before the client's counts over the reported calls were kept: those of all its calls, as then
        b.reported_est, b.reported_reusable = data[8:10] if len(data) >= 10 else (b.est, b.reusable)
        return b


def _enc(h: Histogram) -> str | None:
    return h.encode()


def _dec(data: str | None) -> Histogram:
    return Histogram.decode(data)


class Accumulator:
    """Counts, sums and histograms of a set of requests (see the module's docstring)."""

    def __init__(self, card: dict[str, Any] | None = None, slo: CallSlo | None = None) -> None:
        self.sums = dict.fromkeys(_SUMS, 0)
        self.errors_by_class: dict[str, int] = {}
        self.hist = {name: new_histogram() for name in HISTOGRAMS}
        self.tokens: dict[Hashable, list[float]] = {}  # token_key -> [cached input, new input, output]
        self.estimated_input = False
        self.by_context = [_Bucket() for _ in CONTEXT_LABELS]
        self.by_turn = [_Bucket() for _ in TURN_LABELS]
        self.host = HostTally(card)  # what the host said about itself; ``card`` prices each request as it comes
        self.recipe = RecipeTally()  # the AgentX, validity and intended-start figures (docs/recipes.md)
        self.tasks = TaskTally()  # the tasks that ended (per-task figures)
        self.answers = AnswerTally()  # the answers' checks (the summary's ``answers``)
        self.goodput = GoodputTally(slo)  # the calls and tasks that met the per-call SLO (``slo``: none, none judged)
        self.lanes = LaneTally()  # what the lanes were doing, second by second (the summary's ``concurrency``)
        self.pauses = PauseTally()  # the measured calls whose timing includes a pause of the client's own

    # --- adding ------------------------------------------------------------------------------------------------
    def add(self, r: RequestRecord, measured: bool, token_key: Callable[[float], Hashable]) -> None:
        """Count one request; ``measured``: it enters the per-call figures; ``token_key``: where its tokens go.
        A warm-up call (a recipe's primer, max_tokens 1) is counted as one and is in no other figure but the lanes'."""
        self.lanes.add(r)
        if r.phase == "warmup":
            self.recipe.add_warmup()
            return
        s = self.sums
        s["requests"] += 1
        s["ok"] += r.error is None
        s["retries"] += r.attempt > 1
        if r.error:
            s["errors"] += 1
            self.errors_by_class[r.error] = self.errors_by_class.get(r.error, 0) + 1
        s["invalid_usage"] += r.usage_raw is not None
        if r.final:
            s["finals"] += 1
            s["finals_failed"] += r.error is not None
        for name in ("prompt_tokens", "cached_tokens", "output_tokens", "reasoning_tokens"):
            s[name] += getattr(r, name) or 0
        s["prompt_tokens_est"] += r.prompt_tokens_est
        s["reusable_prefix_tokens"] += r.reusable_prefix_tokens
        self._tokens(r, token_key)
        self.host.add(r, measured)
        self.recipe.add(r, measured)
        self.goodput.add(r, measured)
        self.answers.add(r)
        if measured:
            self._measured(r)

    def add_task(self, t: TaskRecord) -> None:
        self.tasks.add(t)
        self.lanes.add_task(t)

    def _tokens(self, r: RequestRecord, token_key: Callable[[float], Hashable]) -> None:
        """Tokens attributed to when they happened: input at the first token (prefill done), output per read."""
        if r.t_first_token is not None:
            slot = self.tokens.setdefault(token_key(r.t_first_token), [0.0, 0.0, 0.0])
            if r.prompt_tokens is not None:
                c = r.cached_tokens or 0
                slot[0] += c
                slot[1] += r.prompt_tokens - c
            else:
                slot[1] += r.prompt_tokens_est
                self.estimated_input = True
        ch = r.chunks
        if ch:
            scale = token_scale(r)
            key = token_key(r.t_sent + ch[0])
            if scale == 1.0 and token_key(r.t_sent + ch[-2]) == key:  # keys never decrease in time: all share it
                self.tokens.setdefault(key, [0.0, 0.0, 0.0])[2] += sum(ch[1::2])  # (whole counts: the same sum)
                return
            for i in range(0, len(ch), 2):
                self.tokens.setdefault(token_key(r.t_sent + ch[i]), [0.0, 0.0, 0.0])[2] += ch[i + 1] * scale

    def _measured(self, r: RequestRecord) -> None:
        s, h = self.sums, self.hist
        s["measured"] += 1
        s["m_est"] += r.prompt_tokens_est
        s["m_reusable"] += r.reusable_prefix_tokens
        s["m_prompt_reported"] += r.prompt_tokens is not None
        if r.prompt_tokens is not None and r.cached_tokens is not None:
            s["m_reported"] += 1
            s["m_host_prompt"] += r.prompt_tokens
            s["m_host_cached"] += r.cached_tokens
            s["m_reported_est"] += r.prompt_tokens_est
            s["m_reported_reusable"] += r.reusable_prefix_tokens
        if r.t_first_token:
            h["ttft"].record_clipped((r.t_first_token - r.t_sent) * US)
        if r.t_first_answer:
            h["ttfat"].record_clipped((r.t_first_answer - r.t_sent) * US)
        if r.t_done:
            h["e2e"].record_clipped((r.t_done - r.t_sent) * US)
        if r.t_call is not None:
            h["send_wait"].record_clipped((r.t_sent - r.t_call) * US)
        self._itl(r)
        self.pauses.add(r)
        if (speed := decode_tps(r)) is not None:
            h["decode"].record_clipped(speed * TPS_SCALE)
        n_out = r.output_tokens if r.output_tokens is not None else r.output_events
        if n_out and r.t_done and r.t_done > r.t_sent:
            h["with_wait"].record_clipped(n_out / (r.t_done - r.t_sent) * TPS_SCALE)
        prompt = r.prompt_tokens if r.prompt_tokens is not None else r.prompt_tokens_est
        self.by_context[_bucket(prompt, CONTEXT_EDGES)].add(r, speed)
        self.by_turn[_bucket(r.turn, TURN_EDGES)].add(r, speed)

    def _itl(self, r: RequestRecord) -> None:
        """Inter-token gaps: a read carrying k events after a gap g counts k gaps of g/k (``record_itl``)."""
        record_itl(self.hist["itl"], r.chunks)

    # --- combining -----------------------------------------------------------------------------------------------
    def merge(self, other: Accumulator, measured: bool = True) -> None:
        """Add ``other`` in: its counts and tokens, and its per-call figures unless ``measured`` is False."""
        for name in _SUMS:
            if measured or not (name == "measured" or name.startswith("m_")):
                self.sums[name] += other.sums[name]
        for cls, count in other.errors_by_class.items():
            self.errors_by_class[cls] = self.errors_by_class.get(cls, 0) + count
        for key, (cached, new, out) in other.tokens.items():
            slot = self.tokens.setdefault(key, [0.0, 0.0, 0.0])
            slot[0] += cached
            slot[1] += new
            slot[2] += out
        self.estimated_input |= other.estimated_input
        self.host.merge(other.host, counts=True, calls=measured)
        self.recipe.merge(other.recipe, counts=True, calls=measured)
        self.goodput.merge(other.goodput, counts=True, calls=measured)
        self.tasks.merge(other.tasks)
        self.answers.merge(other.answers)
        self.lanes.merge(other.lanes)
        if measured:
            self._merge_calls(other)

    def merge_measured(self, other: Accumulator) -> None:
        """Add in only ``other``'s per-call figures (its counts, sums of all requests and tokens stay out)."""
        for name in _SUMS:
            if name == "measured" or name.startswith("m_"):
                self.sums[name] += other.sums[name]
        self.host.merge(other.host, counts=False, calls=True)
        self.recipe.merge(other.recipe, counts=False, calls=True)
        self.goodput.merge(other.goodput, counts=False, calls=True)
        self._merge_calls(other)

    def _merge_calls(self, other: Accumulator) -> None:
        self.pauses.merge(other.pauses)
        for name in HISTOGRAMS:
            self.hist[name].add(other.hist[name])
        for mine, theirs in ((self.by_context, other.by_context), (self.by_turn, other.by_turn)):
            for a, b in zip(mine, theirs, strict=True):
                a.merge(b)

    def encode(self) -> dict[str, Any]:
        """JSON of the whole state (token keys must be JSON-able: tuples become lists)."""
        return {
            "sums": self.sums,
            "errors_by_class": self.errors_by_class,
            "hist": {name: _enc(h) for name, h in self.hist.items()},
            "tokens": [[list(k) if isinstance(k, tuple) else k, v] for k, v in self.tokens.items()],
            "estimated_input": self.estimated_input,
            "by_context": [b.encode() for b in self.by_context],
            "by_turn": [b.encode() for b in self.by_turn],
            "host": self.host.encode(),
            "recipe": self.recipe.encode(),
            "tasks_ended": self.tasks.encode(),
            "answers": self.answers.encode(),
            "goodput": self.goodput.encode(),
            "lanes": self.lanes.encode(),
            "pauses": self.pauses.encode(),
        }

    @classmethod
    def decode(cls, data: dict[str, Any]) -> Accumulator:
        acc = cls()
        acc.sums.update(data["sums"])
        if "m_reported_est" not in data["sums"]:  # written before these were kept: all calls' counts, as then
            acc.sums["m_reported_est"], acc.sums["m_reported_reusable"] = acc.sums["m_est"], acc.sums["m_reusable"]
        acc.errors_by_class = dict(data["errors_by_class"])
        acc.hist = {name: _dec(data["hist"].get(name)) for name in HISTOGRAMS}
        acc.tokens = {(tuple(k) if isinstance(k, list) else k): list(v) for k, v in data["tokens"]}
        acc.estimated_input = bool(data["estimated_input"])
        acc.by_context = [_Bucket.decode_from(b) for b in data["by_context"]]
        acc.by_turn = [_Bucket.decode_from(b) for b in data["by_turn"]]
        acc.host = HostTally.decode(data.get("host"))
        acc.recipe = RecipeTally.decode(data.get("recipe"))
        acc.tasks = TaskTally.decode(data.get("tasks_ended"))
        acc.answers = AnswerTally.decode(data.get("answers"))
        acc.goodput = GoodputTally.decode(data.get("goodput"))
        acc.lanes = LaneTally.decode(data.get("lanes"))
        acc.pauses = PauseTally.decode(data.get("pauses"))
        return acc


def _bucket(value: int, edges: tuple[int, ...]) -> int:
    """The row of the last edge at or below ``value`` (the first row below the first edge): a bisection of the
    tuple, not numpy's (whose call costs more than the search for a dozen edges, twice per call)."""
    return max(0, bisect_right(edges, value) - 1)
