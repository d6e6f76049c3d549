"""Tests of replay/twin/."""
