"""Prompt prefixes whose KV blocks streams share, as vLLM's automatic prefix caching; idle ones evicted LRU."""
from collections import OrderedDict
from dataclasses import dataclass


@dataclass(eq=False)
class CachedPrefix:
    key: tuple
    length: int
    blocks: list[int]
    users: int = 0
    filled: bool = False        # a prefix of no rows needs no prefill


class PrefixCache:
    def __init__(self):
        self.entries: dict[tuple, CachedPrefix] = {}
        self.idle: OrderedDict[tuple, CachedPrefix] = OrderedDict()
        self.idle_blocks = 0

    def get(self, key) -> CachedPrefix | None:
        return self.entries.get(key)

    def add(self, key, length: int, blocks: list[int]) -> CachedPrefix:
        entry = self.entries[key] = CachedPrefix(key, length, blocks, users=1, filled=not length)
        return entry

    def use(self, entry: CachedPrefix) -> None:
        if not entry.users:
            del self.idle[entry.key]
            self.idle_blocks -= len(entry.blocks)
        entry.users += 1

    def release(self, entry: CachedPrefix) -> None:
        entry.users -= 1
        if not entry.users:
            self.idle[entry.key] = entry
            self.idle_blocks += len(entry.blocks)

    def evict(self) -> list[int]:
        key, entry = self.idle.popitem(last=False)
        del self.entries[key]
        self.idle_blocks -= len(entry.blocks)
        return entry.blocks
