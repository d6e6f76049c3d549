"""Figures from records: accumulators that merge exactly, the summary, windows, breakdowns."""
