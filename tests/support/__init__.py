"""Helpers the tests share: trajectories, servers, the simulated host's API."""
