"""Tests of replay/metrics/."""
