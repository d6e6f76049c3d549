"""The saturation warning blames the client only when its own CPU says so; a lagging loop at low CPU on a busy
machine is reported as the machine being busy, with its load."""

from __future__ import annotations

from replay.metrics.streaming import StreamSummary
from replay.metrics.summary import Window, _client
from replay.reports.text_report import _client as client_lines


def judged(samples: list[dict]) -> dict:
    return _client(samples, Window(0.0, 100.0, True), StreamSummary().acc).to_dict()


def test_a_loop_held_up_by_others_is_the_machine_not_the_client() -> None:
    """What every vLLM run on this 2-core machine showed: 0.7 % client CPU, a lagging loop (the engine had the
    cores): 'raise --workers' was the wrong advice."""
    samples = [{"t": t, "wall_s": 5.0, "cpu_s": 0.035, "lag_p99_ms": 120.0, "load1": 3.4, "cores": 2} for t in (5, 10)]
    cl = judged(samples)
    assert not cl["saturated"] and cl["held_up"] and cl["machine_load"] == 3.4 and cl["cores"] == 2
    text = "\n".join(client_lines(cl))
    assert "the machine was busy (load 3.4 on 2 cores)" in text and "0.7% of a core" in text
    assert "bottleneck" not in text and "raise --workers" not in text


def test_a_client_whose_cpu_is_spent_is_the_bottleneck() -> None:
    cl = judged([{"t": 5, "wall_s": 5.0, "cpu_s": 4.8, "lag_p99_ms": 80.0, "load1": 2.1, "cores": 2}])
    assert cl["saturated"] and not cl["held_up"]
    assert "WARNING: the client was the bottleneck (its CPU was 96" in "\n".join(client_lines(cl))


def test_a_quiet_client_gets_no_warning_and_old_samples_still_read() -> None:
    cl = judged([{"t": 5, "wall_s": 5.0, "cpu_s": 0.5, "lag_p99_ms": 3.0}])  # a run file from before load1
    assert not cl["saturated"] and not cl["held_up"] and cl["machine_load"] is None
    assert "not a bottleneck" in "\n".join(client_lines(cl))
