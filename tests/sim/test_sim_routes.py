"""The fallback route (a seeded share served by a second engine, labelled in the dialect's own field and in
``x-replay-route``) and the affinity fields that reach the truth log, never with a credential."""

import math

import aiohttp
import orjson
import pytest

from replay.sim.server.app import start_sim
from replay.sim.server.routes import FallbackSpec, RoutePlan
from tests.support.sim_api import body_for, post, sse


def test_fallback_spec_parses_and_rejects():
    spec = FallbackSpec.parse("0.3:overloaded")
    assert (spec.share, spec.profile, spec.route) == (0.3, "overloaded", "fallback:overloaded")
    assert FallbackSpec.parse(None) is None and FallbackSpec.parse("") is None
    for bad in ("0.3", "x:fast", "1.5:fast", "-0.1:fast", "0.3:nope"):
        with pytest.raises(ValueError):
            FallbackSpec.parse(bad)


def test_route_shares_hold_within_binomial_bounds_and_the_seed_repeats():
    spec = FallbackSpec(0.3, "overloaded")
    n = 20_000
    plan = RoutePlan(spec, seed=4)
    routes = [plan.draw() for _ in range(n)]
    fallback = routes.count("fallback:overloaded")
    assert abs(fallback - n * 0.3) < 4.5 * math.sqrt(n * 0.3 * 0.7)
    assert plan.counts == {"primary": n - fallback, "fallback:overloaded": fallback}
    again = RoutePlan(spec, seed=4)
    assert [again.draw() for _ in range(n)] == routes
    other = RoutePlan(spec, seed=5)
    assert [other.draw() for _ in range(64)] != routes[:64]
    assert set(RoutePlan(None).draw() for _ in range(100)) == {"primary"}


async def test_the_fallback_share_is_served_by_its_own_engine_and_labelled():
    n = 60
    async with (
        await start_sim("fast", fallback="0.5:h100-8b", dialect="openrouter", fault_seed=2) as sim,
        aiohttp.ClientSession() as http,
    ):
        seen = []
        for i in range(n):
            body = body_for("chat", 4)
            body["messages"][-1]["content"] += f" #{i}"
            _, headers, raw = await post(http, sim.base_url, "chat", body, **{"X-Request-Id": f"q{i}"})
            provider = {c["provider"] for c in (e["data"] for e in sse(raw)) if isinstance(c, dict)}
            seen.append((headers["x-replay-route"], provider))
        truth = await sim.wait_truth(n)
        served = {route: engine.core.prompt_tokens_total for route, engine in sim.engines.items()}
        async with http.get(f"http://{sim.host}:{sim.port}/metrics") as r:
            metrics = await r.text()
    routes = [t["route"] for t in truth]
    assert [route for route, _ in seen] == routes
    assert all(provider == {route} for route, provider in seen)  # OpenRouter's provider names the route
    fallback = routes.count("fallback:h100-8b")
    assert abs(fallback - n / 2) < 4.5 * math.sqrt(n / 4) and 0 < fallback < n
    by_route = {r: sum(t["prompt_tokens"] for t in truth if t["route"] == r) for r in served}
    assert served == by_route  # each engine served exactly its route's prompts
    line = f'replay_sim:route_requests_total{{model_name="replay-sim",route="fallback:h100-8b"}} {fallback}'
    assert line in metrics.splitlines()


@pytest.mark.parametrize(
    ("dialect", "api", "label"),
    [
        ("openai", "chat", lambda events: {c["service_tier"] for c in events if isinstance(c, dict)}),
        ("openai", "responses", lambda events: {events[-1]["response"]["service_tier"]}),
        ("anthropic", "messages", lambda events: {events[0]["message"]["usage"]["service_tier"]}),
        ("vercel", "chat", lambda events: {c.get("provider_metadata", {}).get("gateway", {}).get("routing", {}).get(
            "finalProvider") for c in events if isinstance(c, dict) and c.get("provider_metadata")}),
    ],
)  # fmt: skip
async def test_each_dialect_names_the_route_in_its_own_field(dialect, api, label):
    expected = {
        "openai": {"primary": "default", "fallback:fast": "flex"},
        "anthropic": {"primary": "priority", "fallback:fast": "standard"},
        "vercel": {"primary": "primary", "fallback:fast": "fallback:fast"},
    }[dialect]
    async with await start_sim("fast", fallback="0.5:fast", dialect=dialect) as sim, aiohttp.ClientSession() as http:
        got = []
        for _ in range(16):
            _, headers, raw = await post(http, sim.base_url, api, body_for(api, 3))
            got.append((headers["x-replay-route"], label([e["data"] for e in sse(raw)])))
    assert {route for route, _ in got} == set(expected)  # both routes served some
    assert all(labels == {expected[route]} for route, labels in got)


AFFINITY = {
    "prompt_cache_key": "session-42",
    "user": "agent-7",
    "service_tier": "priority",
    "cache_salt": "salt-1",
    "provider": {"order": ["together"], "allow_fallbacks": False},
    "speed": "fast",
    "providerOptions": {"gateway": {"order": ["vertex"]}},
    "prompt_cache_isolation_key": "tenant-a",
}
HEADERS = {
    "x-session-id": "s-1",
    "x-session-affinity": "s-2",
    "session_id": "s-3",
    "x-prompt-cache-isolation-key": "tenant-b",
    "x-affinity": "s-4",
}
SECRETS = {
    "Authorization": "Bearer sk-secret-1",
    "x-api-key": "sk-secret-2",
    "x-auth-token": "sk-secret-3",
    "x-client-secret": "sk-secret-4",
    "Proxy-Authorization": "Basic sk-secret-5",
    "x-goog-api-key": "sk-secret-6",
    "Cookie": "session=sk-secret-7",
}


@pytest.mark.parametrize("api", ["chat", "messages", "responses", "completions"])
async def test_affinity_fields_reach_the_truth_log_and_no_secret_does(api, tmp_path):
    path = tmp_path / "truth.jsonl"
    async with await start_sim("fast", str(path), faults="429:0.5") as sim, aiohttp.ClientSession() as http:
        for i in range(4):  # some answered, some 429s: every record carries them
            await post(http, sim.base_url, api, body_for(api, 3, **AFFINITY), **HEADERS, **SECRETS,
                       **{"X-Request-Id": f"a{i}"})  # fmt: skip
        await post(http, sim.base_url, api, body_for(api, 3), **SECRETS)
        await sim.wait_truth(5)
    raw = path.read_bytes()
    records = [orjson.loads(line) for line in raw.splitlines()]
    assert {r["status"] for r in records[:4]} == {"ok", "fault"}
    for r in records[:4]:
        assert r["request_fields"] == AFFINITY and r["request_headers"] == HEADERS
    assert records[4]["request_fields"] == {} and records[4]["request_headers"] == {}
    assert b"sk-secret" not in raw
