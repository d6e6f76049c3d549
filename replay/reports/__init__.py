"""Reports made from the summary: text, HTML, CSV, Prometheus, pictures."""
