"""Tests of the simulated host (replay/sim/)."""
