"""replay's tests, one folder per package of replay/ (support/: shared helpers)."""
