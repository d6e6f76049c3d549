"""What a host says about its own capacity, read before probing it, so the twin takes it from the host.

vLLM states its KV cache size and block size in ``/metrics`` (the labels of the ``vllm:cache_config_info``
gauge: ``kv_cache_size_tokens``, or ``num_gpu_blocks`` times ``block_size``) and its served context in
``/v1/models`` (``max_model_len``, which may be less than the model's own). llama-server states its slots (the
calls it decodes at once) and each slot's context in ``/props`` (``total_slots``,
``default_generation_settings.n_ctx``; checked against llama-server 0.3.36 with ``-np 4 -c 16384``: 4 and
4,096). A figure the host states is used as
it is; the probe measures only what the host does not say, and a figure it could only bound is never written
as a measurement. Reading is best effort: a host that does not answer, or answers something else (a redirect
included: never followed, so the key never leaves the host's origin; ``replay.clients.http_session``), states
nothing.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from ssl import SSLContext
from typing import Any

import orjson
from prometheus_client.parser import text_string_to_metric_families

from replay import event_loop
from replay.clients import http_session

MAX_BYTES = 4 << 20


@dataclass(slots=True, frozen=True)
class HostFacts:
    """Host tokens its KV cache holds, its cache block, its served context (each None when not stated)."""

    kv_tokens: int | None = None
    block_size: int | None = None
    max_model_len: int | None = None
    slots: int | None = None  # calls it decodes at once (llama-server's slots)

    def public(self) -> dict[str, Any]:
        return {"kv_tokens": self.kv_tokens, "block_size": self.block_size, "max_model_len": self.max_model_len,
                "slots": self.slots}  # fmt: skip


def _int(value: Any) -> int | None:
    try:
        n = int(float(value))
    except (TypeError, ValueError):
        return None
    return n if n > 0 else None


def cache_config(text: str) -> tuple[int | None, int | None]:
    """(KV tokens, block size) from vLLM's ``cache_config_info`` labels in a Prometheus exposition."""
    with contextlib.suppress(ValueError):
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name.removesuffix("_info") != "vllm:cache_config":
                    continue
                labels = sample.labels
                block = _int(labels.get("block_size"))
                kv = _int(labels.get("kv_cache_size_tokens"))
                blocks = _int(labels.get("num_gpu_blocks"))
                if kv is None and blocks is not None and block is not None:
                    kv = blocks * block
                return kv, block
    return None, None


def served_context(body: bytes, model: str | None) -> int | None:
    """``max_model_len`` of ``model`` (or of the only model) in a ``/v1/models`` answer."""
    try:
        data = orjson.loads(body).get("data")
    except (orjson.JSONDecodeError, AttributeError):
        return None
    cards = [c for c in data if isinstance(c, dict)] if isinstance(data, list) else []
    named = [c for c in cards if c.get("id") == model] or (cards if len(cards) == 1 else [])
    return _int(named[0].get("max_model_len")) if named else None


def llama_props(body: bytes) -> tuple[int | None, int | None]:
    """(slots, each slot's context) from llama-server's ``/props``."""
    try:
        props = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None, None
    if not isinstance(props, dict):
        return None, None
    settings = props.get("default_generation_settings")
    return _int(props.get("total_slots")), _int(settings.get("n_ctx")) if isinstance(settings, dict) else None


def read_host_facts(
    base_url: str, model: str | None, headers: dict[str, str] | None = None, ssl: SSLContext | bool = True
) -> HostFacts:
    """What the host at ``base_url`` (its API root, ``.../v1``) says about itself (``ssl``: the run's TLS setting)."""
    return event_loop.run(_read(base_url, model, headers or {}, ssl))


async def _read(base_url: str, model: str | None, headers: dict[str, str], ssl: SSLContext | bool) -> HostFacts:
    api = base_url.rstrip("/")
    root = api[: -len("/v1")] if api.endswith("/v1") else api
    kv = block = None
    metrics = await http_session.read(root + "/metrics", headers, ssl, MAX_BYTES)
    if metrics is not None:
        kv, block = cache_config(metrics.decode("utf-8", "replace"))
    models = await http_session.read(api + "/models", headers, ssl, MAX_BYTES)
    served = served_context(models, model) if models is not None else None
    props = await http_session.read(root + "/props", headers, ssl, MAX_BYTES)
    slots, slot_context = llama_props(props) if props is not None else (None, None)
    return HostFacts(kv, block, served or slot_context, slots)
