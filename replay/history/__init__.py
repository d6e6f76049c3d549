"""Nights over time: a history of runs (store), their change points (changes) and the document shown (report)."""
