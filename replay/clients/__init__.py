"""Clients: a turn's context rendered into one API flavour's request, streamed, stamped and read into a record."""
