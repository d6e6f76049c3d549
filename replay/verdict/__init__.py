"""Judging a run: thresholds, the baseline gate, the exit code."""
