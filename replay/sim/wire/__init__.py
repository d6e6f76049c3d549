"""The bytes the simulated host sends, one module per API."""
