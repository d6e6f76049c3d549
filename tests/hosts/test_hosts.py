"""Presets, the hosts file and --host NAME[:MODEL]: resolution, speed options, and errors before any request."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from replay.cli import main
from replay.hosts.resolve import HostError, host_facts, resolve
from replay.loops.closed_loop import LoadConfig
from replay.records.reader import read_run
from replay.runner.embedded_host import embedded_host
from replay.runner.single_run import RunError, RunSpec, check_spec, execute
from replay.sessions.tool_time import ToolTimePolicy
from tests.support.trajectories import simple_turns, write_trajectory


def _hosts(tmp: Path, text: str) -> Path:
    path = tmp / "hosts.toml"
    path.write_text(text)
    return path


def test_a_preset_sets_url_flavour_key_variable_and_model(monkeypatch) -> None:
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-test-0123456789")
    r = resolve(RunSpec(host="openrouter:deepseek/deepseek-v4:nitro", route_sort="throughput", service_tier="priority"))
    assert (r.base_url, r.api, r.key_env) == ("https://openrouter.ai/api/v1", "chat", "OPENROUTER_API_KEY")
    assert r.model == "deepseek/deepseek-v4:nitro" and r.preset == r.dialect == "openrouter"
    assert r.body == {"service_tier": "priority", "provider": {"sort": "throughput"}}
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0123456789")
    a = resolve(RunSpec(host="anthropic:claude-x", speed="fast"))
    assert a.api == "anthropic" and a.body == {"speed": "fast"} and a.headers["anthropic-beta"].startswith("fast-mode")
    local = resolve(RunSpec(host="vllm:qwen"))  # a local engine needs no key
    assert local.base_url == "http://127.0.0.1:8000/v1" and local.model == "qwen"


def test_speed_options_in_each_routers_terms() -> None:
    v = resolve(RunSpec(host="http://127.0.0.1:1/v1", dialect="vercel", route_sort="latency", route_order=["a", "b"]))
    assert v.body == {"providerOptions": {"gateway": {"sort": "ttft", "order": ["a", "b"]}}}
    o = resolve(RunSpec(host="http://127.0.0.1:1/v1", dialect="openrouter", route_only=["x"], fallbacks=False))
    assert o.body == {"provider": {"only": ["x"], "allow_fallbacks": False}}
    with pytest.raises(HostError, match="--route-sort: groq does not route"):
        resolve(RunSpec(host="http://127.0.0.1:1/v1", dialect="groq", route_sort="latency"))
    with pytest.raises(HostError, match="--service-tier: groq takes auto, on_demand, flex, performance"):
        resolve(RunSpec(host="http://127.0.0.1:1/v1", dialect="groq", service_tier="ultrafast"))
    with pytest.raises(HostError, match="--speed: cerebras"):
        resolve(RunSpec(host="http://127.0.0.1:1/v1", dialect="cerebras", speed="fast"))


def test_a_missing_key_variable_fails_naming_it(monkeypatch) -> None:
    monkeypatch.delenv("GROQ_API_KEY", raising=False)
    with pytest.raises(RunError, match="--host groq: the preset's key variable: GROQ_API_KEY is not set"):
        check_spec(RunSpec(host="groq:openai/gpt-oss-120b"))


def test_hosts_file_names_work_wherever_host_does(tmp_path: Path, monkeypatch) -> None:
    path = _hosts(
        tmp_path,
        """
[hosts.fw]
preset = "fireworks"
model = "accounts/fireworks/models/deepseek-v4p1-flash"
headers = { "x-session-affinity" = "{session}" }
body = { prompt_cache_key = "replay-{task}" }
gpus = 8
accelerator = "H200"
power_kw = 10.2
price = "fireworks/deepseek-v4.1-flash-1017/standard"

[hosts.box]
url = "http://127.0.0.1:9/v1"
dialect = "sglang"
[hosts.box.price]
input = 0.1
output = 0.4
""",
    )
    monkeypatch.setenv("FIREWORKS_API_KEY", "fw-test-0123456789")
    r = resolve(RunSpec(host="fw:other-model", hosts_file=str(path)))
    assert r.base_url == "https://api.fireworks.ai/inference/v1" and r.model == "other-model"
    assert r.body == {"perf_metrics_in_response": True, "prompt_cache_key": "replay-{task}"}
    assert (r.gpus, r.accelerator, r.power_kw, r.key_env) == (8, "H200", 10.2, "FIREWORKS_API_KEY")
    assert r.public()["price"]["output"] == 1.20 and "fw-test" not in orjson.dumps(r.public()).decode()
    facts = host_facts(RunSpec(host="box", hosts_file=str(path)))
    assert facts == {"gpus": None, "power_kw": None, "price": {"input": 0.1, "output": 0.4}}
    sim = host_facts(RunSpec(sim_profile="default", rate_card="groq/gpt-oss-20b"))
    assert sim["gpus"] == 2 and sim["price"]["output"] == 0.30
    monkeypatch.chdir(tmp_path)
    (tmp_path / "replay.toml").write_text(path.read_text())  # the default hosts file
    assert resolve(RunSpec(host="box")).dialect == "sglang"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[hosts.a]\nmodel = 'm'\n", "hosts.a: needs url or preset"),
        ("[hosts.a]\npreset = 'nope'\n", "hosts.a.preset: unknown preset 'nope'"),
        ("[hosts.a]\npreset = 'groq'\ngpus = 0\n", "hosts.a.gpus: expected a whole number"),
        ("[hosts.a]\npreset = 'groq'\npower_kw = 'lots'\n", "hosts.a.power_kw: expected a positive number"),
        ("[hosts.a]\npreset = 'groq'\nkey = 'sk-123'\n", "hosts.a.key: unknown field"),
        ("[hosts.a]\nurl = 'ftp://x'\n", "hosts.a.url: expected an http"),
        ("[hosts.a]\npreset = 'groq'\n[hosts.a.price]\ninput = 1\n", "hosts.a.price.output: missing"),
        ("[hosts.a]\npreset = 'groq'\napi = 'soap'\n", "hosts.a.api: 'soap' is not one of"),
        ("[servers.a]\n", "unknown table \\[servers\\]"),
        ("[hosts.a\n", "not valid TOML"),
        ("[hosts.a]\npreset = 'groq'\nheaders = { x-a = \"b\\u0007\" }\n", "hosts.a.headers.'x-a': .*U\\+0007"),
    ],
)
def test_bad_hosts_files_name_the_file_and_field(tmp_path: Path, text: str, message: str) -> None:
    path = _hosts(tmp_path, text)
    with pytest.raises(HostError, match=message) as info:
        resolve(RunSpec(host="a", hosts_file=str(path)))
    assert str(path) in str(info.value)


def test_a_key_variable_named_in_the_file_must_be_set(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("MY_KEY_VAR", raising=False)
    path = _hosts(tmp_path, "[hosts.a]\nurl = 'http://127.0.0.1:9/v1'\nkey_env = 'MY_KEY_VAR'\n")
    with pytest.raises(HostError, match=f"{path}: hosts.a.key_env: MY_KEY_VAR is not set"):
        resolve(RunSpec(host="a", hosts_file=str(path)))


def test_unknown_names_fail_with_one_line_before_any_request(tmp_path: Path) -> None:
    path = _hosts(tmp_path, "[hosts.box]\nurl = 'http://127.0.0.1:9/v1'\n")
    out = CliRunner().invoke(main, ["run", "--host", "boxx", "--hosts", str(path), "--out", str(tmp_path / "r.jsonl")])
    assert out.exit_code == 1 and "not a URL, a preset or a host in a hosts file" in out.output
    assert "boxx" in out.output and "box" in out.output and "Traceback" not in out.output
    assert not (tmp_path / "r.jsonl").exists()
    out = CliRunner().invoke(main, ["run", "--dialect", "nope", "--out", str(tmp_path / "r.jsonl")])
    assert out.exit_code == 1 and "--dialect: unknown dialect 'nope'" in out.output


def test_a_hosts_file_preset_against_the_sim_sends_its_key_and_records_no_key(tmp_path: Path, monkeypatch) -> None:
    key = "gsk-test-secret-0123456789"
    monkeypatch.setenv("GROQ_API_KEY", key)
    work = tmp_path / "w.jsonl"
    write_trajectory(work, "w", simple_turns(2, output_tokens=8))
    with embedded_host("fast", dialect="groq") as host:
        path = _hosts(
            tmp_path,
            f"[hosts.g]\npreset = 'groq'\nurl = '{host.base_url}'\nkey_env = 'GROQ_API_KEY'\n"
            "model = 'openai/gpt-oss-120b'\ngpus = 2\npower_kw = 1.5\n",
        )
        result = execute(
            RunSpec(
                trajectories=[str(work)],
                host="g",
                hosts_file=str(path),
                retries=0,
                load=LoadConfig(concurrency=1, tool_time=ToolTimePolicy.parse("none")),
                out=str(tmp_path / "run.jsonl"),
                progress=False,
            )
        )
    run = read_run(result.path)
    h = run.header["host"]
    assert (h["name"], h["preset"], h["dialect"], h["gpus"], h["power_kw"]) == ("g", "groq", "groq", 2, 1.5)
    assert h["api_key_env"] == "GROQ_API_KEY" and h["api_key_set"] is True and h["model"] == "openai/gpt-oss-120b"
    assert all(r.ok and r.server_timings for r in run.requests)
    assert key not in result.path.read_text()


def test_chat_only_fields_stay_off_other_flavours(monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789")
    chat = resolve(RunSpec(host="openai:gpt-x"))
    assert chat.body["stream_options"] == {"include_usage": True, "include_obfuscation": False}
    assert "stream_options" not in resolve(RunSpec(host="openai:gpt-x", api="responses")).body


def test_a_key_in_a_secret_named_header_is_scrubbed_from_the_run_file(tmp_path: Path) -> None:
    work = tmp_path / "w.jsonl"
    write_trajectory(work, "w", simple_turns(1, output_tokens=4))
    spec = RunSpec(
        trajectories=[str(work)],
        headers={"Authorization": "Bearer hdr-secret-0123456789"},
        sim_profile="fast",
        load=LoadConfig(concurrency=1, tool_time=ToolTimePolicy.parse("none")),
        out=str(tmp_path / "run.jsonl"),
        progress=False,
    )
    result = execute(spec)
    text = result.path.read_text()
    assert "hdr-secret-0123456789" not in text and result.header["host"]["headers"] == {"Authorization": "***"}
