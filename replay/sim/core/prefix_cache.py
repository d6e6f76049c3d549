"""The KV cache as vLLM keeps it: a pool of fixed-size blocks, full prompt blocks named by chained hashes.

A block is named by the hash of (parent block's hash, its own tokens), so a block matches only when the
whole prefix before it matches too; lookup walks the chain from the first block and stops at the first
miss, and never serves the whole prompt (at least one token is computed, to yield the first output).

Capacity is the KV budget in blocks. A block held by a running sequence is pinned (reference counted).
When the last holder lets go, a named block stays in the cache, evictable, at the tail of an LRU queue;
a sequence releases its blocks tail first, so a chain loses its tail before its head. A block that is
needed when none is free evicts the least recently released named block. Anonymous blocks (a prompt's
partial last block, answer tokens) are freed outright. Counters: ``hit_tokens`` / ``query_tokens`` (the
prefix-cache queries and hits vLLM exports), ``miss_tokens``, ``evicted_blocks``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

import numpy as np


class KVBlockPool:
    """Block accounting of the KV cache with prefix caching."""

    def __init__(self, capacity_tokens: int, block_size: int = 16, caching: bool = True) -> None:
        if block_size < 1:
            raise ValueError("block_size must be >= 1")
        self.block_size = block_size
        self.capacity_blocks = max(capacity_tokens // block_size, 0)
        self.caching = caching
        self._refs: dict[int, int] = {}  # resident named block -> holders
        self._lru: OrderedDict[int, None] = OrderedDict()  # named blocks nobody holds, least recent first
        self._anon = 0  # anonymous blocks held
        self.hit_tokens = 0
        self.query_tokens = 0
        self.evicted_blocks = 0

    # --- sizes ---------------------------------------------------------------------------------------
    def __len__(self) -> int:
        """Named blocks resident (held or evictable)."""
        return len(self._refs)

    @property
    def used_blocks(self) -> int:
        """Blocks held by running sequences (pinned)."""
        return len(self._refs) - len(self._lru) + self._anon

    @property
    def free_blocks(self) -> int:
        """Blocks a sequence may take now: never used, or evictable."""
        return self.capacity_blocks - self.used_blocks

    @property
    def usage(self) -> float:
        """Share of the cache pinned by running sequences (vLLM's kv_cache_usage_perc)."""
        return self.used_blocks / self.capacity_blocks if self.capacity_blocks else 0.0

    @property
    def miss_tokens(self) -> int:
        return self.query_tokens - self.hit_tokens

    def held(self, h: int) -> bool:
        return self._refs.get(h, 0) > 0

    def resident(self, h: int) -> bool:
        return h in self._refs

    # --- names -----------------------------------------------------------------------------------------
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

    def match(self, hashes: Sequence[int], num_tokens: int) -> int:
        """Blocks of the longest cached chain prefix, capped so at least one of ``num_tokens`` is computed."""
        if not self.caching:
            return 0
        hits = 0
        refs = self._refs
        for h in hashes[: max(num_tokens - 1, 0) // self.block_size]:
            if h not in refs:
                break
            hits += 1
        return hits

    def count_query(self, num_tokens: int, hit_blocks: int) -> int:
        """Count one prefix-cache query of ``num_tokens`` tokens that hit ``hit_blocks`` blocks."""
        cached = hit_blocks * self.block_size
        self.query_tokens += num_tokens
        self.hit_tokens += cached
        return cached

    # --- holding ---------------------------------------------------------------------------------------
    def can_take(self, new_blocks: int, hit_hashes: Sequence[int] = ()) -> bool:
        """Whether ``new_blocks`` fresh blocks fit once the ``hit_hashes`` blocks are held too."""
        lru = self._lru
        return new_blocks + sum(1 for h in hit_hashes if h in lru) <= self.free_blocks

    def hold(self, hashes: Sequence[int]) -> None:
        """Pin resident named blocks (cache hits)."""
        refs, lru = self._refs, self._lru
        for h in hashes:
            if refs[h] == 0:
                del lru[h]
            refs[h] += 1

    def take(self, n: int) -> bool:
        """Take ``n`` anonymous blocks, evicting least recently released named ones as needed; False (and
        nothing taken) if fewer than ``n`` are free."""
        if n > self.free_blocks:
            return False
        spare = self.capacity_blocks - len(self._refs) - self._anon  # never used
        lru, refs = self._lru, self._refs
        for _ in range(n - spare):
            h, _ = lru.popitem(last=False)
            del refs[h]
            self.evicted_blocks += 1
        self._anon += n
        return True

    def name(self, h: int) -> bool:
        """Turn one held anonymous block into the named block ``h`` once its tokens are computed; False
        (it stays anonymous) if ``h`` is already resident or caching is off."""
        if not self.caching:
            return False
        refs = self._refs
        if h in refs:
            return False
        refs[h] = 1
        self._anon -= 1
        return True

    def release(self, blocks: Sequence[int | None]) -> None:
        """Let go of a sequence's blocks (named ones by hash, anonymous as None), tail first."""
        refs, lru = self._refs, self._lru
        for h in reversed(blocks):
            if h is None:
                self._anon -= 1
                continue
            left = refs[h] - 1
            refs[h] = left
            if left == 0:
                lru[h] = None

    # --- one-shot use --------------------------------------------------------------------------------
    def lookup_and_insert(self, token_ids: np.ndarray | Sequence[int]) -> int:
        """Serve a prompt at once and let it go: the cached tokens it gets, then all its full blocks
        cached (as many as fit, head first). The instant profile and tests use it."""
        return self.lookup_and_insert_hashes(self.block_hashes(token_ids), len(token_ids))

    def lookup_and_insert_hashes(self, hashes: Sequence[int], n: int) -> int:
        """``lookup_and_insert`` of an ``n``-token prompt whose full blocks hash to ``hashes``."""
        hits = self.match(hashes, n)
        cached = self.count_query(n, hits)
        if not self.caching:
            return cached
        self.hold(hashes[:hits])
        held: list[int | None] = list(hashes[:hits])
        for h in hashes[hits:]:
            if not self.take(1):
                break
            held.append(h if self.name(h) else None)
        self.release(held)
        return cached


PrefixCache = KVBlockPool  # the name the first sim used
