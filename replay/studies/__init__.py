"""Studies made of runs: sweeps, capacity searches, comparisons, claims."""
