"""Prefix cache: chained whole-block matching, the never-the-whole-prompt cap, LRU eviction."""

from collections import OrderedDict

import numpy as np

from replay.sim.prefix_cache import PrefixCache


class ReferencePrefixCache:
    """Slow and obvious: a block is named by the whole prefix up to its end; same touch order and LRU."""

    def __init__(self, capacity_tokens: int, block_size: int) -> None:
        self.bs = block_size
        self.capacity = capacity_tokens // block_size
        self.blocks: OrderedDict[tuple[int, ...], None] = OrderedDict()
        self.evicted = 0

    def lookup_and_insert(self, ids: list[int]) -> int:
        keys = [tuple(ids[: (i + 1) * self.bs]) for i in range(len(ids) // self.bs)]
        hits = 0
        for key in keys[: max(len(ids) - 1, 0) // self.bs]:
            if key not in self.blocks:
                break
            hits += 1
        for key in reversed(keys):
            self.blocks.pop(key, None)
            self.blocks[key] = None
        while len(self.blocks) > self.capacity:
            self.blocks.popitem(last=False)
            self.evicted += 1
        return hits * self.bs


def test_matches_reference_on_random_workload():
    rng = np.random.default_rng(7)
    stems = [rng.integers(0, 5, size=int(rng.integers(0, 40))).tolist() for _ in range(6)]
    cache, ref = PrefixCache(capacity_tokens=80, block_size=4), ReferencePrefixCache(80, 4)
    hits = misses = 0
    for _ in range(2000):
        stem = stems[int(rng.integers(len(stems)))]
        prompt = stem + rng.integers(0, 3, size=int(rng.integers(0, 12))).tolist()
        expected = ref.lookup_and_insert(prompt)
        assert cache.lookup_and_insert(np.array(prompt, dtype=np.int32)) == expected
        assert cache.evicted_blocks == ref.evicted
        assert len(cache) == len(ref.blocks)
        hits, misses = hits + expected, misses + len(prompt) - expected
    assert (cache.hit_tokens, cache.miss_tokens) == (hits, misses)
    assert cache.hit_tokens > 0 and cache.evicted_blocks > 0  # the workload exercised both


def test_whole_blocks_only_and_never_the_whole_prompt():
    cache = PrefixCache(capacity_tokens=10_000, block_size=16)
    prompt = list(range(40))
    assert cache.lookup_and_insert(prompt) == 0
    assert cache.lookup_and_insert(prompt) == 32  # 2 full blocks; the partial third is never cached
    exact = list(range(100, 132))
    cache.lookup_and_insert(exact)
    assert cache.lookup_and_insert(exact) == 16  # len - 1 = 31 tokens rounds down to one block
    assert cache.lookup_and_insert([5]) == 0
    assert cache.lookup_and_insert([]) == 0


def test_chain_breaks_at_first_differing_block():
    cache = PrefixCache(capacity_tokens=10_000, block_size=4)
    cache.lookup_and_insert(list(range(20)))
    assert cache.lookup_and_insert([*range(8), 99, *range(9, 20)]) == 8
    assert cache.lookup_and_insert([99, *range(1, 20)]) == 0  # later blocks equal, but their parent is not


def test_lru_evicts_tail_blocks_first():
    cache = PrefixCache(capacity_tokens=12, block_size=4)  # 3 blocks
    a, b = list(range(13)), [50, 51, 52, 53, 54]
    cache.lookup_and_insert(a)  # blocks a1 a2 a3
    cache.lookup_and_insert(b)  # block b1 evicts a3, the tail of a
    assert cache.evicted_blocks == 1
    assert cache.lookup_and_insert(a) == 8  # a1 a2 still there; a3 is recomputed (evicting b1)
    assert cache.lookup_and_insert(b) == 0


def test_zero_capacity_caches_nothing():
    cache = PrefixCache(capacity_tokens=0, block_size=16)
    cache.lookup_and_insert(list(range(64)))
    assert cache.lookup_and_insert(list(range(64))) == 0
    assert len(cache) == 0
