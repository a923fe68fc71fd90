"""Prompt prefixes whose KV blocks streams share, as vLLM's automatic prefix caching does.

A prefix (prompt.Prefix: the rows before the first target-text row) is prefilled once into blocks of its own. A
stream that starts with it takes its full blocks into its block table (one more user each) and a copy of its
partial last block (copy on write: the stream's own rows follow the prefix in that block), and prefills only its
own rows. A prefix no stream uses stays cached and is evicted, least recently used first, when blocks run out."""
from collections import OrderedDict
from dataclasses import dataclass


@dataclass(eq=False)
class CachedPrefix:
    key: tuple
    length: int                 # tokens
    blocks: list[int]
    users: int = 0
    filled: bool = False        # its KV is computed (or queued on the device); a prefix of no rows needs none


class PrefixCache:
    def __init__(self):
        self.entries: dict[tuple, CachedPrefix] = {}
        self.idle: OrderedDict[tuple, CachedPrefix] = OrderedDict()     # no user, least recently used first
        self.idle_blocks = 0

    def get(self, key) -> CachedPrefix | None:
        return self.entries.get(key)

    def add(self, key, length: int, blocks: list[int]) -> CachedPrefix:
        """A new prefix, used by the stream that brings it."""
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
        """The blocks of the least recently used prefix without users, which is forgotten."""
        key, entry = self.idle.popitem(last=False)
        del self.entries[key]
        self.idle_blocks -= len(entry.blocks)
        return entry.blocks
