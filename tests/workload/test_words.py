"""Counted nouns: every message of import, inspect and synth says "1 trajectory", never "1 trajectories"."""

from __future__ import annotations

import pytest

from replay.workload.words import plural


@pytest.mark.parametrize(
    ("n", "noun", "text"),
    [
        (1, "trajectory", "1 trajectory"),
        (2, "trajectory", "2 trajectories"),
        (0, "turn", "0 turns"),
        (1, "turn", "1 turn"),
        (26, "turn", "26 turns"),
        (1328, "call", "1,328 calls"),
        (1, "subagent", "1 subagent"),
        (3, "entry", "3 entries"),
        (2, "datum", "2 data"),
    ],
)
def test_plural(n, noun, text):
    assert plural(n, noun, "data" if noun == "datum" else None) == text
