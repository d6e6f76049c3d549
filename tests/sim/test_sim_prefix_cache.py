"""KV block pool with prefix caching: chained whole-block matching, pinning, LRU eviction tail first,
checked step by step against a slow and obvious reference model of blocks."""

import numpy as np

from replay.sim.core.engine import EngineCore
from replay.sim.core.prefix_cache import KVBlockPool
from replay.sim.core.profiles import get_profile


class ReferencePool:
    """A block is named by the whole token prefix up to its end; holders counted; free named blocks in
    a plain list, least recently released first."""

    def __init__(self, capacity_tokens: int, block_size: int) -> None:
        self.bs = block_size
        self.capacity = capacity_tokens // block_size
        self.refs: dict[tuple, int] = {}
        self.lru: list[tuple] = []
        self.anon = 0
        self.evicted = self.hits = self.queries = 0

    def keys(self, ids: list[int]) -> list[tuple]:
        return [tuple(ids[: (i + 1) * self.bs]) for i in range(len(ids) // self.bs)]

    def used(self) -> int:
        return len(self.refs) - len(self.lru) + self.anon

    def admit(self, ids: list[int]) -> list | None:
        """Hold the cached prefix, take blocks for the rest, name the full ones; None if it does not fit."""
        keys = self.keys(ids)
        hits = 0
        for key in keys[: max(len(ids) - 1, 0) // self.bs]:
            if key not in self.refs:
                break
            hits += 1
        new = -(-len(ids) // self.bs) - hits
        if new + sum(1 for k in keys[:hits] if k in self.lru) > self.capacity - self.used():
            return None
        self.queries += len(ids)
        self.hits += hits * self.bs
        for key in keys[:hits]:
            if self.refs[key] == 0:
                self.lru.remove(key)
            self.refs[key] += 1
        held: list = list(keys[:hits])
        for i in range(hits, hits + new):
            if len(self.refs) + self.anon >= self.capacity:
                victim = self.lru.pop(0)
                del self.refs[victim]
                self.evicted += 1
            if i < len(keys) and keys[i] not in self.refs:
                self.refs[keys[i]] = 1
                held.append(keys[i])
            else:
                self.anon += 1
                held.append(None)
        return held

    def release(self, held: list) -> None:
        for key in reversed(held):
            if key is None:
                self.anon -= 1
            else:
                self.refs[key] -= 1
                if self.refs[key] == 0:
                    self.lru.append(key)


def pool_admit(pool: KVBlockPool, ids: list[int]) -> list | None:
    """The same admission through the pool's primitives, as the engine uses them."""
    hashes = pool.block_hashes(ids)
    hits = pool.match(hashes, len(ids))
    new = -(-len(ids) // pool.block_size) - hits
    if not pool.can_take(new, hashes[:hits]):
        return None
    pool.count_query(len(ids), hits)
    pool.hold(hashes[:hits])
    assert pool.take(new)
    held: list = list(hashes[:hits])
    for i in range(hits, hits + new):
        held.append(hashes[i] if i < len(hashes) and pool.name(hashes[i]) else None)
    return held


def test_pool_matches_the_reference_through_admissions_and_releases():
    rng = np.random.default_rng(11)
    stems = [rng.integers(0, 4, size=int(rng.integers(0, 60))).tolist() for _ in range(8)]
    pool, ref = KVBlockPool(240, 4), ReferencePool(240, 4)  # 60 blocks
    active: list[tuple[list, list]] = []
    refused = 0
    for _ in range(4000):
        if active and (rng.random() < 0.45 or len(active) > 6):
            mine, theirs = active.pop(int(rng.integers(len(active))))
            pool.release(mine)
            ref.release(theirs)
        else:
            stem = stems[int(rng.integers(len(stems)))]
            ids = stem + rng.integers(0, 3, size=int(rng.integers(1, 30))).tolist()
            mine, theirs = pool_admit(pool, ids), ref.admit(ids)
            assert (mine is None) == (theirs is None)
            if mine is None:
                refused += 1
            else:
                active.append((mine, theirs))
        assert (pool.hit_tokens, pool.query_tokens, pool.evicted_blocks) == (ref.hits, ref.queries, ref.evicted)
        assert (len(pool), pool.used_blocks) == (len(ref.refs), ref.used())
        assert pool.used_blocks <= pool.capacity_blocks
    assert pool.hit_tokens > 0 and pool.evicted_blocks > 0 and refused > 0  # every path was exercised


def test_pinned_blocks_are_never_evicted():
    pool = KVBlockPool(capacity_tokens=16, block_size=4)  # 4 blocks
    held = pool_admit(pool, list(range(9)))  # 3 blocks, pinned
    assert pool_admit(pool, [50, 51, 52, 53, 54, 55, 56, 57]) is None  # 2 more do not fit
    pool.release(held)
    assert pool.free_blocks == 4 and len(pool) == 2  # 2 named blocks stay cached, evictable
    assert pool_admit(pool, list(range(9))) is not None
    assert pool.hit_tokens == 8


def test_whole_blocks_only_and_never_the_whole_prompt():
    cache = KVBlockPool(capacity_tokens=10_000, block_size=16)
    prompt = list(range(40))
    assert cache.lookup_and_insert(prompt) == 0
    assert cache.lookup_and_insert(prompt) == 32  # 2 full blocks; the partial third is never cached
    exact = list(range(100, 132))
    cache.lookup_and_insert(exact)
    assert cache.lookup_and_insert(exact) == 16  # len - 1 = 31 tokens rounds down to one block
    assert cache.lookup_and_insert([5]) == 0
    assert cache.lookup_and_insert([]) == 0


def test_chain_breaks_at_first_differing_block():
    cache = KVBlockPool(capacity_tokens=10_000, block_size=4)
    cache.lookup_and_insert(list(range(20)))
    assert cache.lookup_and_insert([*range(8), 99, *range(9, 20)]) == 8
    assert cache.lookup_and_insert([99, *range(1, 20)]) == 0  # later blocks equal, but their parent is not


def test_lru_evicts_tail_blocks_first():
    cache = KVBlockPool(capacity_tokens=12, block_size=4)  # 3 blocks
    a, b = list(range(13)), [50, 51, 52, 53, 54]
    cache.lookup_and_insert(a)  # blocks a1 a2 a3
    cache.lookup_and_insert(b)  # block b1 evicts a3, the tail of a
    assert cache.evicted_blocks == 1
    assert cache.lookup_and_insert(a) == 8  # a1 a2 still there; a3 is recomputed (evicting b1)
    assert cache.lookup_and_insert(b) == 0


def test_zero_capacity_caches_nothing():
    cache = KVBlockPool(capacity_tokens=0, block_size=16)
    cache.lookup_and_insert(list(range(64)))
    assert cache.lookup_and_insert(list(range(64))) == 0
    assert len(cache) == 0


def test_engine_reports_exactly_what_its_cache_served():
    """Sessions growing their context turn after turn, through the engine: the cached tokens it reports
    add up to the cache's own hit counter, and each equals the reference model's prediction."""
    rng = np.random.default_rng(3)
    core = EngineCore(get_profile("fast"))
    ref = ReferencePool(core.profile.kv_budget_tokens, core.block_size)
    contexts = [rng.integers(0, 50_000, 300).tolist() for _ in range(4)]
    t, reported = 0.0, []
    for _turn in range(6):
        for ctx in contexts:
            ctx += rng.integers(0, 50_000, int(rng.integers(20, 400))).tolist()
            seq = core.new_seq("r", np.array(ctx, dtype=np.int32), 8)
            core.add(seq, t)
            while (step := core.schedule(t)) is not None:
                t += step.duration
                core.complete(step, t)
            held = ref.admit(ctx)
            ref.release(held)
            expected = ref.hits
            reported.append(seq.cached_tokens)
            assert sum(reported) == core.pool.hit_tokens == expected
    assert sum(reported) > 0  # turns after the first hit their previous prompt
