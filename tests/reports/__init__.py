"""Tests of replay/reports/."""
