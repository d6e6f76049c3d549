"""Tests of replay/run/."""
