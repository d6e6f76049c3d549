"""Tests of replay/hosts/."""
