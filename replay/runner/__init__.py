"""One run end to end: host, header, loop, footer, summary; resumed runs and soaks' side jobs."""
