"""The API flavours: each renders the canonical messages and reads its own stream."""
