"""Tests of replay/clients/."""
