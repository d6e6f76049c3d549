"""Small trajectories written to tmp files."""

from __future__ import annotations

from pathlib import Path

import orjson


def write_trajectory(path: Path, traj_id: str, turns: list[dict], **header) -> Path:
    lines = [orjson.dumps({"format": "replay.trajectory/1", "id": traj_id, **header})]
    lines += [orjson.dumps(t) for t in turns]
    with open(path, "ab") as f:
        f.write(b"\n".join(lines) + b"\n")
    return path


def simple_turns(n: int, *, output_tokens: int = 20, tool_time_s: float = 0.0, grow: str = "x") -> list[dict]:
    """n turns: a system + user start, then one observation per turn."""
    turns = [
        {
            "append": [
                {"role": "system", "content": "You are a careful coding agent."},
                {"role": "user", "content": "Fix the failing test in parser.py"},
            ],
            "output": {"content": "Let me look.\n```bash\ncat parser.py\n```"},
            "output_tokens": output_tokens,
            "tool_time_s": tool_time_s,
        }
    ]
    for i in range(1, n):
        turns.append(
            {
                "append": [{"role": "user", "content": f"<output>line {i} {grow * (50 * i)}</output>"}],
                "output": {"content": f"step {i}: run the tests\n```bash\npytest -q tests/test_{i}.py\n```"},
                "output_tokens": output_tokens,
                "tool_time_s": tool_time_s,
            }
        )
    return turns
