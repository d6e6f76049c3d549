"""Jobs: what a user asks for, end to end (one run; the embedded simulated host it may need)."""
