"""Results: the run file's records, every figure made from them, and the reports that show them."""
