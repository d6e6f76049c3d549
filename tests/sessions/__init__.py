"""Tests of replay/sessions/."""
