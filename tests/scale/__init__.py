"""Tests of replay/scale/."""
