"""A run sharded over worker processes or Ray actors, one run file."""
