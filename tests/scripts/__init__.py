"""The benchmark scripts' own checks."""
