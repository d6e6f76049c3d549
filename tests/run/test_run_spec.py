"""RunSpec in groups: the flat form of the library's older RunSpec still works (mapped into the groups), and a
run resolves its host once."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from click.testing import CliRunner

import replay
from replay.cli import main
from replay.runner import single_run
from replay.runner.run_spec import FLAT, Flat, HostSpec, LoopSpec, RunSpec, SimSpec
from tests.support.trajectories import simple_turns, write_trajectory


def test_every_flat_name_reads_and_writes_its_group() -> None:
    spec = RunSpec(host="http://127.0.0.1:9/v1", sim_profile="fast", workers=2, thresholds=["ttft_p95<2s"], out="o")
    assert spec.endpoint.host == spec.host == "http://127.0.0.1:9/v1"
    assert spec.sim.profile == spec.sim_profile == "fast" and spec.loop.workers == spec.workers == 2
    assert spec.gate.thresholds == spec.thresholds == ["ttft_p95<2s"] and spec.out == "o"
    for name, (group, field) in FLAT.items():
        assert getattr(spec, name) is getattr(getattr(spec, group), field), name
    # every flat name is a descriptor of the class, and every descriptor a flat name (fields added since included)
    assert {n for n, v in vars(RunSpec).items() if isinstance(v, Flat)} == set(FLAT)
    assert RunSpec(["w.jsonl"], host="h").trajectories == ["w.jsonl"]  # the older form's one positional argument
    grouped = RunSpec(endpoint=HostSpec(host="http://127.0.0.1:9/v1"), sim=SimSpec(profile="fast"),
                      loop=LoopSpec(workers=2), out="o")  # fmt: skip
    grouped.thresholds = ["ttft_p95<2s"]
    assert grouped == spec
    with pytest.raises(TypeError, match="sim_profil"):
        RunSpec(sim_profil="fast")


def test_a_spec_made_from_another_never_changes_it() -> None:
    base = RunSpec(host="http://127.0.0.1:9/v1", headers={"X-A": "1"})
    other = dataclasses.replace(base, host="http://127.0.0.1:8/v1", sim_profile="instant")
    other.model = "m"
    assert (base.host, base.model, base.sim_profile) == ("http://127.0.0.1:9/v1", None, "default")
    assert (other.host, other.model, other.sim_profile) == ("http://127.0.0.1:8/v1", "m", "instant")


def test_the_host_is_resolved_once_per_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = single_run.resolve

    def counting(spec: object) -> object:
        calls.append(spec)
        return real(spec)

    monkeypatch.setattr(single_run, "resolve", counting)
    work = write_trajectory(tmp_path / "w.jsonl", "w", simple_turns(2, output_tokens=4))
    args = ["run", str(work), "-c", "1", "--sim-profile", "instant", "-q", "--out", str(tmp_path / "a.jsonl")]
    res = CliRunner().invoke(main, args, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert len(calls) == 1  # replay run: checked before anything is printed, then run with that resolution
    spec = replay.RunSpec(trajectories=[str(work)], sim_profile="instant", out=str(tmp_path / "b.jsonl"))
    assert replay.run(spec).exit_code == 0 and len(calls) == 2  # the library: once more for its own run
    checked = single_run.check_spec(spec)
    assert checked.endpoint.resolved is not None and single_run.check_spec(checked) is checked and len(calls) == 3
    checked.host = "http://127.0.0.1:9/v1"  # another host: resolved again when it is next checked
    assert checked.endpoint.resolved is None
