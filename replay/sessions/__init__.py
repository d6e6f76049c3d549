"""Sessions: simulated agents (one trajectory each), their tool pauses, and the loop that keeps N of them running."""
