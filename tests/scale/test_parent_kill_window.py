"""What a ``kill -9`` of a sharded run's parent can lose is said where ``--workers`` is documented, in the terms the
code holds it to: a worker's batch not yet sent (``BATCH_S``, ``BATCH_MAX``) and the batches not yet read."""

from __future__ import annotations

from pathlib import Path

from replay.scale.channel import BATCH_MAX, BATCH_S

ROOT = Path(__file__).resolve().parents[2]


def test_the_calls_a_kill_of_the_parent_can_lose_are_said_with_the_codes_bounds() -> None:
    window = f"{BATCH_S * 1000:.0f} ms"
    text = " ".join((ROOT / "docs" / "scale-out.md").read_text().split())
    said = text[text.index("A `kill -9` of the parent loses") :][:600]
    assert f"the calls it finished in the last {window}, at most {BATCH_MAX} records" in said, said
    assert "not yet read" in said and "a graceful stop" in said, said
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert f"A `kill -9` of this process loses the calls each worker finished in the last {window}" in readme
