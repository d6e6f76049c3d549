"""Prefix cache over prompt token ids, in fixed-size blocks with chained hashes, as vLLM keeps it.

A block is identified by the hash of (parent block's hash, its own tokens), so a block matches only when
the whole prefix before it matches too. Lookup walks the chain from the first block and stops at the
first miss. Capacity is counted in blocks; the least recently used block is evicted first, and a prompt's
blocks are touched tail first so a chain loses its tail before its head, as vLLM frees them.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

import numpy as np


class PrefixCache:
    """Which prompt blocks the host has cached; counts hits, misses and evictions."""

    def __init__(self, capacity_tokens: int, block_size: int = 16) -> None:
        if block_size < 1:
            raise ValueError("block_size must be >= 1")
        self.block_size = block_size
        self.capacity_blocks = capacity_tokens // block_size
        self._blocks: OrderedDict[int, None] = OrderedDict()  # block hash -> None, LRU first
        self.hit_tokens = 0  # prompt tokens served from cache
        self.miss_tokens = 0  # prompt tokens that had to be computed
        self.evicted_blocks = 0

    def __len__(self) -> int:
        """Number of cached blocks."""
        return len(self._blocks)

    def block_hashes(self, token_ids: np.ndarray | Sequence[int]) -> list[int]:
        """Chained hashes of the prompt's full blocks, first block first."""
        ids = np.asarray(token_ids, dtype=np.int32)
        width = self.block_size * ids.itemsize
        raw = ids[: len(ids) // self.block_size * self.block_size].tobytes()
        hashes = []
        parent = 0
        for offset in range(0, len(raw), width):  # bytes slices hash far faster than tuples of ints
            parent = hash((parent, raw[offset : offset + width]))
            hashes.append(parent)
        return hashes

    def lookup_and_insert(self, token_ids: np.ndarray | Sequence[int]) -> int:
        """Prompt tokens served from cache, then cache (or refresh) every full block of the prompt.

        Only whole blocks count, and never the whole prompt: at most ``len - 1`` tokens rounded down to a
        block, so at least one token is computed and yields the first output token (vLLM does the same).
        """
        n = len(token_ids)
        hashes = self.block_hashes(token_ids)
        blocks = self._blocks
        hits = 0
        for h in hashes[: max(n - 1, 0) // self.block_size]:
            if h not in blocks:
                break
            hits += 1
        for h in reversed(hashes):
            blocks[h] = None
            blocks.move_to_end(h)
        for _ in range(len(blocks) - self.capacity_blocks):
            blocks.popitem(last=False)
            self.evicted_blocks += 1
        cached = hits * self.block_size
        self.hit_tokens += cached
        self.miss_tokens += n - cached
        return cached
