"""Load: sessions (one simulated agent each) and the loop that keeps N of them running."""
