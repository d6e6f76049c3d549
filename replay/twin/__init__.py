"""replay probe: a host measured in passes, and the simulated twin fitted to it."""
