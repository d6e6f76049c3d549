"""The run file: records, their writer and reader, secrets scrubbed."""
