"""The simulated host's HTTP face: requests, answers, faults, dialects, the truth log."""
