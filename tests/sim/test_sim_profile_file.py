"""Profiles from files: physical inputs over a shipped base, measured step tables, and their errors."""

import dataclasses
import socket
from pathlib import Path

import aiohttp
import numpy as np
import orjson
import pytest
from click.testing import CliRunner

from replay.cli import main
from replay.runner.embedded_host import embedded_host
from replay.sim.core.engine import EngineCore
from replay.sim.core.profile_file import ProfileFileError, load_profile_file, resolve_profile
from replay.sim.core.profiles import get_profile
from replay.sim.core.step_table import StepShape, StepTable
from replay.sim.server.app import start_sim
from replay.workload.trajectory import load_workload
from tests.support.trajectories import simple_turns, write_trajectory
from tests.support.virtual import virtual_run

TABLE = """
[steps.prefill]
tokens = [1000, 2000]
context = [0, 10000]
ms = [[10.0, 30.0], [20.0, 60.0]]

[steps.decode]
batch = [1, 10]
context = [1000, 5000]
ms = [[4.0, 5.0], [6.0, 12.0]]
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def table_profile(tmp_path: Path, extra: str = "") -> Path:
    return write(tmp_path, "measured.toml", f'base = "fast"\nname = "measured"\n{extra}{TABLE}')


def test_physical_inputs_over_a_base_in_toml_and_json(tmp_path):
    toml = write(
        tmp_path, "tuned.toml", 'base = "h100-8b"\nmfu = 0.5\nmax_num_seqs = 64\nenable_prefix_caching = false\n'
    )
    p = load_profile_file(toml)
    base = get_profile("h100-8b")
    assert (p.name, p.mfu, p.max_num_seqs, p.enable_prefix_caching) == ("tuned", 0.5, 64, False)
    assert dataclasses.replace(p, name=base.name, mfu=base.mfu, max_num_seqs=256, enable_prefix_caching=True) == base
    assert p.prefill_tps(0) < base.prefill_tps(0) and p.decode_tps(1) == base.decode_tps(1)
    js = write(tmp_path, "bw.json", orjson.dumps({"name": "more-bw", "mem_efficiency": 0.9}).decode())
    q = load_profile_file(js)  # no base: the one given (default: `default`)
    assert (q.name, q.mem_efficiency, q.gpus) == ("more-bw", 0.9, get_profile("default").gpus)
    assert load_profile_file(js, base="moe-8gpu").experts == 256
    assert resolve_profile("fast", str(js)).weight_bytes == get_profile("fast").weight_bytes
    assert resolve_profile("moe-8gpu") is get_profile("moe-8gpu")


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("a.toml", "mfu = 0.5\nmfo = 1\n", "a.toml: mfo: unknown field (did you mean 'mfu'?)"),
        ("a.toml", 'mfu = "fast"\n', "a.toml: mfu: expected a number >= 0; got 'fast'"),
        ("a.toml", "gpus = 1.5\n", "a.toml: gpus: expected a whole number >= 0; got 1.5"),
        ("a.toml", "enable_prefix_caching = 1\n", "a.toml: enable_prefix_caching: expected true or false"),
        ("a.toml", 'base = "h200"\n', "a.toml: base: expected one of default, reasoning"),
        ("a.toml", "mfu = \n", "a.toml: not valid TOML"),
        ("a.json", "[1, 2]", "a.json: expected a table of profile fields; got list"),
        ("a.json", "{", "a.json: not valid JSON"),
        ("a.yaml", "mfu: 1", "a.yaml: expected a .toml or .json profile file"),
        ("a.toml", "gpus = 0\n", "a.toml: profile 'a': gpus must be at least 1"),
        ("a.toml", "mfu = 0\n", "a.toml: profile 'a': mfu must be a positive number"),
        ("a.toml", "gpu_memory_utilization = 0.1\n", "a.toml: profile 'a': the weights leave no room for a KV cache"),
        ("a.toml", "[steps.prefill]\ntokens = [1]\n", "a.toml: steps.prefill.context: expected a non-empty list"),
        ("a.toml", TABLE.replace("[[10.0, 30.0], [20.0, 60.0]]", "[[10.0, 30.0]]"),
         "a.toml: steps.prefill.ms: expected 2 rows (one per tokens) of 2 numbers"),
        ("a.toml", TABLE.replace("[[4.0, 5.0],", "[[4.0, -5.0],"),
         "a.toml: steps.decode.ms[0][1]: expected a positive number of milliseconds; got -5.0"),
        ("a.toml", TABLE.replace("batch = [1, 10]", "batch = [10, 1]"),
         "a.toml: steps.decode.batch: expected strictly increasing numbers"),
        ("a.toml", TABLE.replace("[steps.decode]", "[steps.decodes]"), "a.toml: steps.decodes: unknown key"),
        ("a.toml", 'base = "instant"\n' + TABLE, "a.toml: tokens_per_write: expected 0 with a step table"),
    ],
)  # fmt: skip
def test_a_bad_file_is_named_with_its_field(tmp_path, name, text, message):
    path = write(tmp_path, name, text)
    with pytest.raises(ProfileFileError) as exc:
        load_profile_file(path)
    assert message in str(exc.value) and str(path) in str(exc.value) and "\n" not in str(exc.value)


def test_missing_file(tmp_path):
    with pytest.raises(ProfileFileError, match=r"nope\.toml: cannot read"):
        load_profile_file(tmp_path / "nope.toml")


def test_table_interpolates_bilinearly_clamps_below_and_extrapolates_above(tmp_path):
    t = load_profile_file(table_profile(tmp_path)).step_table
    assert isinstance(t, StepTable)
    assert t.prefill(1000, 0) == 10 and t.prefill(2000, 10000) == 60  # grid points exactly
    assert t.prefill(1500, 5000) == pytest.approx((10 + 30 + 20 + 60) / 4)  # bilinear in a cell
    assert t.prefill(500, 0) == 10 and t.prefill(1000, -1) == 10  # clamped below each axis
    assert t.prefill(3000, 0) == pytest.approx(30)  # linear past the last tokens: +10 ms per 1000
    assert t.prefill(1000, 20000) == pytest.approx(50)  # and past the last context
    assert t.decode(19, 1000) == pytest.approx(6 + 9 / 9 * (6 - 4))  # batch past the last: +2 ms per 9
    descending = StepTable.from_dict({"prefill": {"tokens": [1, 2], "context": [0], "ms": [[5], [4]]},
                                      "decode": {"batch": [1], "context": [0], "ms": [[1]]}})  # fmt: skip
    assert descending.prefill(10, 0) == 4  # extrapolation never goes below the last figure


def test_the_table_times_every_step_of_the_engine(tmp_path):
    p = load_profile_file(table_profile(tmp_path))
    assert p.step_table is not None and p.summary()["step_model"] == "table"
    assert p.step_seconds(StepShape.prefill(1500, 0)) == pytest.approx(0.015)
    assert p.step_seconds(StepShape.decode(10, 5000)) == pytest.approx(0.012)
    # a mixed step: both parts, minus the fixed cost both include (the decode grid's first point)
    mixed = StepShape(1010, 0, 0, 10, 10 * 5000, 1000, 0)
    assert p.step_seconds(mixed) == pytest.approx((10 + 12 - 4) / 1000)
    # in the engine: a 3000-token prompt in chunks of 2000 (budget), then decodes over its context
    core = EngineCore(dataclasses.replace(p, max_num_batched_tokens=2000))
    seq = core.new_seq("r", np.arange(3000, dtype=np.int32), 3)
    core.add(seq, 0.0)
    durations = []
    while (step := core.schedule(sum(durations))) is not None:
        durations.append(step.duration)
        core.complete(step, sum(durations))
    chunk2 = (10 + 2000 / 10000 * (30 - 10)) / 1000  # 1000 tokens over the first chunk's 2000
    decodes = [(4 + (ctx - 1000) / 4000 * (5 - 4)) / 1000 for ctx in (3001, 3002)]  # one stream at ~3k
    assert durations == pytest.approx([0.020, chunk2, *decodes])
    assert seq.t_first_token == pytest.approx(0.020 + chunk2)


def test_the_virtual_clock_runs_on_the_same_table(tmp_path):
    """The virtual clock steps the same EngineCore: a table twice as slow doubles its decode time."""
    traj = write_trajectory(tmp_path / "w.jsonl", "t", simple_turns(3, output_tokens=50))
    workload = load_workload([traj])
    fast = load_profile_file(table_profile(tmp_path))
    slow = dataclasses.replace(fast, step_table=StepTable.from_dict(orjson.loads(orjson.dumps({
        "prefill": {"tokens": [1000, 2000], "context": [0, 10000], "ms": [[20, 60], [40, 120]]},
        "decode": {"batch": [1, 10], "context": [1000, 5000], "ms": [[8, 10], [12, 24]]}}))))  # fmt: skip
    a, b = (virtual_run(p, workload, 1, 5, 0).summary for p in (fast, slow))
    assert a["user_decode_tps"]["p50"] == pytest.approx(1000 / 4, rel=0.01)  # 4 ms steps: one stream, short context
    assert b["user_decode_tps"]["p50"] == pytest.approx(a["user_decode_tps"]["p50"] / 2, rel=0.01)


def test_cli_lists_and_rejects_profile_files(tmp_path):
    path = table_profile(tmp_path)
    res = CliRunner().invoke(main, ["sim", "--profile-file", str(path), "--list-profiles"])
    assert res.exit_code == 0, res.output
    lines = orjson.loads(res.output)  # one JSON array
    assert lines[-1]["profile"] == "measured" and lines[-1]["step_model"] == "table"
    assert {"default", "moe-8gpu", "speculator-warmup"} <= {line["profile"] for line in lines}
    bad = write(tmp_path, "bad.toml", "mfu = -1\n")
    res = CliRunner().invoke(main, ["sim", "--profile-file", str(bad)])
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert f"Invalid value for --profile-file: {bad}: mfu: expected a number >= 0; got -1" in res.output


async def test_start_sim_serves_a_profile_file(tmp_path):
    sim = await start_sim("fast", profile_file=str(table_profile(tmp_path)))
    try:
        assert sim.engine.profile.name == "measured" and sim.engine.profile.step_table is not None
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{sim.port}/health") as resp:
                assert (await resp.json())["profile"] == "measured"
            body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5}
            async with http.post(f"http://127.0.0.1:{sim.port}/v1/chat/completions", json=body) as resp:
                assert (await resp.json())["usage"]["completion_tokens"] == 5
    finally:
        await sim.stop()


def test_embedded_host_passes_the_file_on(tmp_path):
    with embedded_host("fast", profile_file=str(table_profile(tmp_path))) as host:
        with socket.create_connection(("127.0.0.1", host.port)) as s:
            s.sendall(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            reply = b"".join(iter(lambda: s.recv(4096), b""))
        assert b'"profile":"measured"' in reply.replace(b" ", b"")
    bad = write(tmp_path, "bad.toml", "nope = 1\n")
    with pytest.raises(RuntimeError, match="exited with code 1"), embedded_host("fast", profile_file=str(bad)):
        pass
