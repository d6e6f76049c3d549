"""The simulated host's engine: continuous batching, the prefix cache, profiles, the clock."""
