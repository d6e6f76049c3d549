"""Tool time: how long a replayed agent pauses between calls (its tools running)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ToolTimePolicy:
    """How long the agent pauses between calls: ``recorded | scale:X | fixed:S | none``."""

    kind: str = "recorded"
    value: float = 1.0

    @classmethod
    def parse(cls, spec: str) -> ToolTimePolicy:
        kind, _, arg = spec.strip().partition(":")
        if kind in ("recorded", "none") and not arg:
            return cls(kind, 1.0 if kind == "recorded" else 0.0)
        if kind in ("scale", "fixed") and arg:
            try:
                value = float(arg)
            except ValueError:
                value = -1.0
            if value >= 0:
                return cls(kind, value)
        raise ValueError(f"tool time policy {spec!r}: expected recorded, none, scale:X or fixed:SECONDS (X, S >= 0)")

    def pause(self, recorded_s: float) -> float:
        if self.kind == "recorded":
            return recorded_s
        if self.kind == "scale":
            return recorded_s * self.value
        if self.kind == "fixed":
            return self.value
        return 0.0

    def __str__(self) -> str:
        return self.kind if self.kind in ("recorded", "none") else f"{self.kind}:{self.value:g}"
