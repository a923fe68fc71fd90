"""Paged KV cache; streams of one prompt prefix share its full blocks (prefix_cache.py)."""
from collections import deque

import torch

from engine.models.base import KVLayout
from engine.kernels.paged_attention import as_bytes
from engine.kernels.registry import ops
from engine.core.prefix_cache import PrefixCache
from engine.core.sequence import KVState
from engine.core.transfer import upload


class PagedKVCache:
    def __init__(self, cfg: KVLayout, num_blocks: int, block_size: int, stream_slots: int, max_blocks: int,
                 dtype, device):
        """The last block and the last stream slot are scratch: padding rows write there."""
        shape = (cfg.num_layers, num_blocks * block_size, cfg.num_kv_heads, cfg.head_dim)
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.block_size, self.num_blocks, self.stream_slots = block_size, num_blocks, stream_slots
        self.free_blocks = deque(range(num_blocks - 1))
        self.prefixes = PrefixCache()
        self.tables = torch.full((2 * stream_slots, max_blocks), num_blocks - 1, dtype=torch.int64, device=device)
        self.synced = [0] * stream_slots          # of each slot's block table, the blocks copied to the device
        self.one_per_stream = False

    def _blocks(self, tokens: int) -> int:
        return -(-tokens // self.block_size)

    def available(self) -> int:
        return len(self.free_blocks) + self.prefixes.idle_blocks

    def _take(self, n: int) -> list[int]:
        while len(self.free_blocks) < n:
            self.free_blocks.extend(self.prefixes.evict())
        return [self.free_blocks.popleft() for _ in range(n)]

    def append(self, seq, new_tokens: int) -> None:
        """Counts the tokens in, with the blocks they need (called for every talking stream at every step)."""
        kv = seq.kv
        missing = self._blocks(kv.num_tokens + new_tokens) - len(kv.block_table)
        if missing > 0:
            kv.block_table += self._take(missing)
        kv.num_tokens += new_tokens

    def room_for_one(self, seq) -> bool:
        """Whether one more token fits: in a block it holds, or a free one (asked of every stream at every step)."""
        kv = seq.kv
        return kv.num_tokens < len(kv.block_table) * self.block_size or self.available() > 0

    def _own_blocks(self, prompt) -> int:
        return self._blocks(prompt.length + 1) - prompt.prefix.length // self.block_size

    def can_start(self, prompt) -> bool:
        entry = self.prefixes.get(prompt.prefix.key)
        available = self.available() - (len(entry.blocks) if entry is not None and not entry.users else 0)
        prefix = self._blocks(prompt.prefix.length) if entry is None else 0
        return prefix + self._own_blocks(prompt) <= available

    def prefill_tokens(self, prompt) -> int:
        return prompt.rows.shape[0] + (0 if prompt.prefix.key in self.prefixes.entries else prompt.prefix.length)

    def start(self, seq, prompt) -> None:
        """Shares the prefix's full blocks; the stream's own start with a copy of its partial last block. The prompt's
        rows are counted in: they go in at the prefix's length."""
        prefix = prompt.prefix
        entry = self.prefixes.get(prefix.key)
        if entry is None:
            entry = self.prefixes.add(prefix.key, prefix.length, self._take(self._blocks(prefix.length)))
        else:
            self.prefixes.use(entry)
        seq.kv = KVState(entry.length, entry.blocks[:entry.length // self.block_size], entry)
        self.append(seq, prompt.rows.shape[0])

    def release(self, seq) -> None:
        if seq.kv.cached_prefix is not None:
            self.free_blocks.extend(seq.kv.block_table[seq.kv.cached_prefix.length // self.block_size:])
            self.prefixes.release(seq.kv.cached_prefix)
        if seq.slot >= 0:
            self.synced[seq.slot] = 0
        seq.kv = KVState()

    def copy_partial_blocks(self, seqs) -> None:
        pairs = [(s.kv.cached_prefix.blocks[-1], s.kv.block_table[len(s.kv.cached_prefix.blocks) - 1]) for s in seqs
                 if s.kv.cached_prefix.length % self.block_size]
        if pairs:
            blocks = upload(pairs, device=self.k.device)
            src, dst = (blocks[:, i, None] * self.block_size + torch.arange(self.block_size, device=self.k.device)
                        for i in (0, 1))
            for cache in (as_bytes(self.k), as_bytes(self.v)):
                cache[:, dst.flatten()] = cache[:, src.flatten()]

    def prefix_table_rows(self, entries) -> list[int]:
        rows = [self.stream_slots + i for i in range(len(entries))]
        self._write_tables([(r, i, b) for r, e in zip(rows, entries) for i, b in enumerate(e.blocks)])
        return rows

    def sync_tables(self, seqs) -> None:
        synced, new = self.synced, []
        for s in seqs:
            table = s.kv.block_table
            if len(table) > synced[s.slot]:
                new += [(s.slot, i, table[i]) for i in range(synced[s.slot], len(table))]
                synced[s.slot] = len(table)
        self._write_tables(new)

    def _write_tables(self, entries: list[tuple[int, int, int]]) -> None:
        if entries:
            rows, cols, blocks = upload(entries, device=self.tables.device).unbind(1)
            self.tables[rows, cols] = blocks

    def locate(self, stream_slots: torch.Tensor, positions: torch.Tensor, one_per_stream: bool = False) -> None:
        """one_per_stream (decode): no row reads another's key, so attention may write them as it goes."""
        self.one_per_stream = one_per_stream
        tables = self.tables[stream_slots]
        blocks = tables.gather(1, (positions // self.block_size)[:, None])[:, 0]
        self.slot_mapping, self.block_tables = blocks * self.block_size + positions % self.block_size, tables
        self.context_lens = positions + 1

    def attend(self, layer: int, q, k, v, scale: float):
        return ops.paged_attention(q, self.k[layer], self.v[layer], self.block_tables, self.context_lens, scale,
                               self.block_size, (k, v, self.slot_mapping), self.one_per_stream)
