"""Tests of replay/workload/."""
