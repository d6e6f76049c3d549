"""How the terminal reports write a figure: seconds (ms below one), a share, a rate; '-' for a figure with no value."""

from __future__ import annotations


def seconds(v: float | None, unit: str = "s") -> str:
    """Seconds as ms below one second (``unit`` other than "s": the number as it is, one decimal)."""
    if v is None:
        return "-"
    if unit == "s":
        return f"{v * 1000:,.1f} ms" if abs(v) < 1 else f"{v:,.2f} s"
    return f"{v:,.1f}"


def pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def rate(v: float | None) -> str:
    return "-" if v is None else f"{v:,.0f}"
