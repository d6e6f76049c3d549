"""Hosts: URLs, presets and the hosts file resolved; the hardware behind per-GPU figures."""
