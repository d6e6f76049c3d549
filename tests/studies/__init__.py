"""Tests of replay/studies/."""
