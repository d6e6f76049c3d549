"""Tests of replay/loops/."""
