"""Tests of replay/records/."""
