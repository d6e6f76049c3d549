"""`replay report` on damaged run files: it reports what the file still holds and names every line it skipped."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from replay.cli import main

HEADER = {"type": "header", "format": "replay.run/1", "load": {"concurrency": 1}, "host": {"base_url": "x"}}
REQUEST = {"type": "request", "id": "a", "session": 0, "task": 0, "trajectory": "t", "turn": 0, "t_sent": 1.0,
           "t_first_token": 1.1, "t_last_token": 1.5, "t_done": 1.6, "output_tokens": 5, "output_events": 5,
           "chunks": [0.1, 1, 0.5, 4], "prompt_tokens": 10, "cached_tokens": 0}  # fmt: skip
TASK = {"type": "task", "task": 0, "session": 0, "trajectory": "t", "t_start": 1.0, "t_end": 2.0, "turns": 1,
        "turns_total": 1, "model_time_s": 0.6, "tool_time_s": 0.0, "complete": True}  # fmt: skip
WINDOW = {"type": "window", "index": 0, "t_start": 0.9, "t_end": 2.0, "steady": {}, "other": {}}
GOOD = [HEADER, {"type": "phase", "name": "start", "t": 0.9}, REQUEST, TASK,
        {"type": "client", "t": 1.5, "wall_s": 5, "cpu_s": 0.1, "lag_p99_ms": 1, "lag_max_ms": 2}]  # fmt: skip

DAMAGE = {
    "torn last line": [b'{"type":"request","id":"b","ses'],
    "binary garbage": [b"\x00\xff\xfe garbage \x80"],
    "a JSON array": [b"[1, 2, 3]"],
    "a bare number": [b"42"],
    "unknown record type": [orjson.dumps({"type": "mystery", "x": 1})],
    "no record type": [orjson.dumps({"id": "c"})],
    "request without an id": [orjson.dumps({k: v for k, v in REQUEST.items() if k != "id"})],
    "request time as text": [orjson.dumps({**REQUEST, "id": "d", "t_sent": "yesterday"})],
    "request time absurd": [
        b'{"type":"request","id":"e","session":0,"task":0,"trajectory":"t","turn":0,"t_sent":1e300}'
    ],
    "token count as text": [orjson.dumps({**REQUEST, "id": "f", "output_tokens": "many"})],
    "chunks of odd length": [orjson.dumps({**REQUEST, "id": "g", "chunks": [0.1, 1, 0.2]})],
    "chunks with text": [orjson.dumps({**REQUEST, "id": "h", "chunks": [0.1, "x"]})],
    "task with a field missing": [orjson.dumps({k: v for k, v in TASK.items() if k != "t_end"})],
    "phase without a time": [orjson.dumps({"type": "phase", "name": "stop"})],
    "client sample without cpu": [orjson.dumps({"type": "client", "t": 1.0, "wall_s": 1, "lag_p99_ms": 1})],
    "a second header": [orjson.dumps({**HEADER, "format": "replay.run/9"})],
    "a newer replay's fields": [orjson.dumps({**REQUEST, "id": "i", "from_the_future": {"x": 1}})],
    **{  # a window record with a key missing, or of the wrong type: a KeyError or TypeError traceback before
        f"window without {key}": [orjson.dumps({k: v for k, v in WINDOW.items() if k != key})]
        for key in ("index", "t_start", "t_end", "steady", "other")
    },
    "window whose figures are text": [orjson.dumps({**WINDOW, "steady": "x"})],
}


def _write(path: Path, extra: list[bytes]) -> Path:
    path.write_bytes(b"\n".join([*map(orjson.dumps, GOOD), *extra]) + b"\n")
    return path


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_a_damaged_line_is_skipped_and_named_and_the_rest_reported(tmp_path: Path, case: str) -> None:
    path = _write(tmp_path / "run.jsonl", DAMAGE[case])
    for args in ([], ["--json"]):
        res = CliRunner().invoke(main, ["report", str(path), *args])
        assert res.exit_code == 0 and res.exception is None, res.output
    summary = orjson.loads(CliRunner().invoke(main, ["report", str(path), "--json"]).stdout)
    damaged_line = len(GOOD) + 1
    if case == "a newer replay's fields":  # unknown fields are ignored: the record counts
        assert summary["requests"] == 2 and "skipped" not in res.stderr
    else:
        assert summary["requests"] == 1 and summary["tasks"]["complete"] == 1
        assert f"run.jsonl:{damaged_line}: skipped: " in res.stderr


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "no header line"),
        (orjson.dumps(REQUEST), "no header line"),
        (orjson.dumps({**HEADER, "format": "something/2"}), "run file format 'something/2'"),
        (b"not json at all\n", "no header line"),
    ],
)
def test_a_file_without_a_header_is_refused_in_one_line(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "run.jsonl"
    path.write_bytes(content)
    res = CliRunner().invoke(main, ["report", str(path)])
    assert res.exit_code == 1 and message in res.output and "Traceback" not in res.output


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [  # each a traceback before (AttributeError, TypeError) in the figures or the text report
        ("host", "x", "header field 'host': expected an object, got a string"),
        ("load", [], "header field 'load': expected an object, got a list"),
        ("workload", 5, "header field 'workload': expected an object, got the number 5"),
        ("simulated", "x", "header field 'simulated': expected an object"),
        ("simulated_truth_log", 5, "header field 'simulated_truth_log': expected a string"),
        ("thresholds", 5, "header field 'thresholds': expected a list of strings"),
        ("recipe", 5, "header field 'recipe': expected an object"),
        ("host", {"base_url": "x", "power_kw": "x"}, "header field 'host.power_kw': expected a number"),
        ("workload", {"paths": 5}, "header field 'workload.paths': expected a list of strings"),
        ("workload", {"padding": "x"}, "header field 'workload.padding': expected an object"),
    ],
)
def test_a_header_field_of_the_wrong_type_is_refused_naming_file_line_and_field(
    tmp_path: Path, field: str, value: object, message: str
) -> None:
    path = tmp_path / "run.jsonl"
    path.write_bytes(b"\n".join(orjson.dumps(x) for x in [{**HEADER, field: value}, *GOOD[1:]]) + b"\n")
    for args in ([], ["--json"]):
        res = CliRunner().invoke(main, ["report", str(path), *args])
        assert res.exit_code == 1, (res.exit_code, res.output, repr(res.exception))
        assert "Traceback" not in res.output and f"{path}:1: {message}" in res.output, res.output
