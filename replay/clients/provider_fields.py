"""What a host says about itself beyond the OpenAI fields: each provider's own extras, read generically.

Every field here rides on an event the flavours decode anyway (the first chunk, the finish chunk, the usage
chunk) or on a response header, so reading them adds nothing to the per-read path. Any provider's field is read
whatever the dialect: a gateway may pass another provider's fields through, and a field that is absent costs
nothing. Sources: ``../shared/PROVIDERS.md`` (section per provider) and docs/providers.md.

- Groq: ``x_groq.id`` (first and finish chunk), ``x_groq.usage`` (finish chunk; the same object as ``usage``)
  whose ``queue_time``, ``prompt_time``, ``completion_time`` and ``total_time`` (seconds) are the server timings.
- Cerebras: a top-level ``time_info`` on the finish chunk (the same four times, and ``created``).
- llama.cpp: a top-level ``timings`` on the finish chunk (milliseconds).
- Fireworks: ``perf_metrics`` on the finish chunk (when asked with ``perf_metrics_in_response``), else the
  ``fireworks-server-time-to-first-token`` header (seconds).
- OpenRouter: ``usage.cost`` (USD) beside the counts; the serving ``provider`` on every chunk.
  With the opt-in header (the preset sends it) ``openrouter_metadata`` on the final chunk (OpenRouter's router
  metadata guide: experimental): a call fell back when its ``attempt`` is above 1 or ``attempts`` lists more
  than one (openrouter.ai/docs/guides/features/router-metadata; the SDKs' ``OpenRouterMetadata``).
- Vercel AI Gateway: ``provider_metadata.gateway.routing.finalProvider``; a call fell back when
  ``routing.modelAttempts`` lists more than one model, or one took more than one provider attempt
  (``providerAttemptCount``; vercel/ai ``packages/gateway/src/gateway-provider-metadata.ts``). Where the routing
  metadata rides on the OpenAI-compatible stream is the sim's choice (PROVIDERS.md §8 could not verify it).
- Anthropic: ``usage.speed`` (beta fast mode) beside ``usage.service_tier``.
- Speculative decoding, per call (``speculation``): SGLang's ``meta_info`` (``spec_accept_token_num``,
  ``spec_draft_token_num``, ``spec_verify_ct``: its native ``/generate`` answer has them, on the final chunk of a
  stream; on its OpenAI-compatible chat stream ``choices[].meta_info`` is where third-party clients read them, which
  the SGLang source read here does not show: unverified) and llama.cpp's ``timings.draft_n`` and
  ``timings.draft_n_accepted`` (PROVIDERS.md §12). vLLM reports no per-request acceptance (only its
  ``spec_decode`` counters: ``runner/host_metrics.py``).
"""

from __future__ import annotations

from typing import Any

from replay.clients.stream import StreamState
from replay.clients.usage import get, host_value
from replay.records import host_numbers as hn

GROQ_TIMES = ("queue_time", "prompt_time", "completion_time", "total_time")
# per-call speculation: replay's name <- (SGLang meta_info, llama.cpp timings)
SPEC_FIELDS = {
    "accepted": ("spec_accept_token_num", "draft_n_accepted"),
    "drafted": ("spec_draft_token_num", "draft_n"),
    "drafts": ("spec_verify_ct", None),
}
TIMING_KEYS = ("timings", "time_info", "perf_metrics")  # top-level chunk fields that hold server timings
FIREWORKS_TTFT = "fireworks-server-time-to-first-token"
SECONDS = {*GROQ_TIMES, "server-time-to-first-token", "server-processing-time"}  # timings in seconds; ``*_ms`` ms


# The top-level fields that carry extras: a chunk with none of them (most hosts' every chunk) is passed by one set
# operation, not a dozen look-ups (it is decoded on the per-call path: the role, finish and usage chunks).
_EXTRAS = frozenset({"x_groq", *TIMING_KEYS, "provider_metadata", "openrouter_metadata", "meta_info"})


def note_chunk(st: StreamState, obj: dict[str, Any]) -> None:
    """The extras one decoded OpenAI-style chunk carries."""
    if _EXTRAS.isdisjoint(obj):
        choices = obj.get("choices")
        if not (isinstance(choices, list) and choices and isinstance(choices[0], dict) and "meta_info" in choices[0]):
            return
    groq = obj.get("x_groq")
    if isinstance(groq, dict):
        if isinstance(groq.get("id"), str):
            st.served["request_id"] = groq["id"][:200]
        if obj.get("usage") is None and groq.get("usage") is not None:
            st.usage_parts.append(groq["usage"])  # Groq sends it here always, in ``usage`` only when asked
    for key in TIMING_KEYS:
        if obj.get(key) is not None:
            st.timings = bounded_timings(obj[key], key, st.notes)
    routing = get(obj, "provider_metadata", "gateway", "routing")
    if isinstance(routing, dict):
        final = routing.get("finalProvider")
        if isinstance(final, str) and final:
            st.served["provider"] = final[:200]
        if _vercel_fell_back(routing.get("modelAttempts")):
            st.served["fallback"] = "gateway.routing"
    meta = obj.get("openrouter_metadata")
    if isinstance(meta, dict) and _openrouter_fell_back(meta):
        st.served["fallback"] = "openrouter_metadata"
    choices = obj.get("choices")
    info = obj.get("meta_info")
    if not isinstance(info, dict) and isinstance(choices, list) and choices and isinstance(choices[0], dict):
        info = choices[0].get("meta_info")
    if isinstance(info, dict):
        _note_speculation(st, info, 0, "meta_info")


def _note_speculation(st: StreamState, obj: dict[str, Any], which: int, where: str) -> None:
    """The per-call speculation counts ``obj`` holds under the names of ``SPEC_FIELDS[...][which]``, each a whole
    number within ``host_numbers``' bounds (one that is not is left out, with a note); none: nothing noted."""
    got: dict[str, int] = {}
    for name, keys in SPEC_FIELDS.items():
        key = keys[which]
        if key is None or key not in obj:
            continue
        n = hn.integer(obj[key], 0, hn.MAX_COUNT)
        if n is None:
            st.notes.append(f"{where}.{key} {hn.describe(obj[key])} left out: not a count in 0..{hn.MAX_COUNT}")
        else:
            got[name] = n
    if got:
        st.speculation = got


def speculation(st: StreamState) -> dict[str, int] | None:
    """The call's speculation counts: what a chunk's ``meta_info`` said, else llama.cpp's timings."""
    if st.speculation is None and isinstance(st.timings, dict):
        _note_speculation(st, st.timings, 1, "timings")
    return st.speculation


def _vercel_fell_back(attempts: Any) -> bool:
    if not isinstance(attempts, list) or not attempts:
        return False
    if len(attempts) > 1:
        return True
    count = attempts[0].get("providerAttemptCount") if isinstance(attempts[0], dict) else None
    return hn.integer(count, 2, 1_000_000) is not None  # a count a host sent: bounded, as every number it sends


def _openrouter_fell_back(meta: dict[str, Any]) -> bool:
    attempt, attempts = meta.get("attempt"), meta.get("attempts")
    return hn.integer(attempt, 2, 1_000_000) is not None or (isinstance(attempts, list) and len(attempts) > 1)


def note_usage(st: StreamState, usage: Any) -> None:
    """Extras of the usage object the counts were taken from: Groq's timings, OpenRouter's cost."""
    if not isinstance(usage, dict):
        return
    if st.timings is None and any(k in usage for k in GROQ_TIMES):
        st.timings = bounded_timings({k: usage[k] for k in GROQ_TIMES if k in usage}, "usage", st.notes)
    cost = usage.get("cost")
    if cost is not None:
        usd = hn.number(cost, 0.0, hn.MAX_USD)
        if usd is None:
            st.notes.append(f"usage.cost {hn.describe(cost)} left out: not a number of USD in 0..{hn.MAX_USD:g}")
        else:
            st.served["cost"] = usd
    speed = usage.get("speed")
    if isinstance(speed, str) and speed:
        st.served["speed"] = speed[:50]


def bounded_timings(value: Any, where: str, notes: list[str]) -> Any:
    """A host's timings object with every number checked (``replay.records.host_numbers``): seconds within a day,
    ``*_ms`` within a day's milliseconds, any other number plain; a number that is not is left out, with a note.
    (The figures read the times through the same bounds: ``metrics.host.server_figures``.)"""
    if isinstance(value, dict):
        out = {}
        for key, v in value.items():
            if isinstance(v, int | float) and not isinstance(v, bool):
                hi = hn.MAX_SECONDS if key in SECONDS else hn.MAX_MS if str(key).endswith("_ms") else hn.MAX_ANY
                lo = 0.0 if hi != hn.MAX_ANY else -hn.MAX_ANY
                if hn.number(v, lo, hi) is None:
                    notes.append(f"{where}.{key} = {hn.describe(v)} left out: outside {lo:g}..{hi:g}")
                    continue
            out[key] = bounded_timings(v, f"{where}.{key}", notes) if isinstance(v, dict) else v
        value = out
    return host_value(value)


def header_timings(headers: dict[str, str], notes: list[str]) -> dict[str, Any] | None:
    """Server timings a host sends only as headers (Fireworks' server TTFT), or None."""
    value = headers.get(FIREWORKS_TTFT)
    if value is None:
        return None
    seconds = hn.from_text(value, 0.0, hn.MAX_SECONDS)
    if seconds is None:
        notes.append(f"header {FIREWORKS_TTFT} {hn.describe(value)} left out: not seconds in 0..{hn.MAX_SECONDS:g}")
        return None
    return {"server-time-to-first-token": seconds}
