"""Paged KV cache for the talker: a pool of fixed-size blocks and a block table per stream slot.

The host hands out blocks (`grow`, `release`); the device keeps every slot's block table and learns only the
blocks taken since the last step (`sync_tables`). Every new token (a prompt's during prefill, one per stream
during decode) is a query row: `locate` finds its cache slot and context on the device, from its stream slot
and position, and `attend` writes the rows' keys and values, then reads each row's live tokens only."""
from collections import deque

import torch

from .config import LMConfig
from .paged_attention import paged_attention
from .transfer import upload


class PagedKVCache:
    def __init__(self, cfg: LMConfig, num_blocks: int, block_size: int, stream_slots: int, max_blocks: int,
                 dtype, device):
        """The last block and the last stream slot are scratch: padding rows write there."""
        shape = (cfg.num_layers, num_blocks * block_size, cfg.num_kv_heads, cfg.head_dim)
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.block_size, self.num_blocks = block_size, num_blocks
        self.free_blocks = deque(range(num_blocks - 1))
        self.tables = torch.full((stream_slots, max_blocks), num_blocks - 1, dtype=torch.int64, device=device)
        self.one_per_stream = False

    def blocks_needed(self, seq, new_tokens: int) -> int:
        return max(0, -(-(seq.num_tokens + new_tokens) // self.block_size) - len(seq.block_table))

    def can_grow(self, seq, new_tokens: int) -> bool:
        return self.blocks_needed(seq, new_tokens) <= len(self.free_blocks)

    def grow(self, seq, new_tokens: int) -> None:
        for _ in range(self.blocks_needed(seq, new_tokens)):
            seq.block_table.append(self.free_blocks.popleft())

    def release(self, seq) -> None:
        self.free_blocks.extend(seq.block_table)
        seq.block_table = []
        seq.synced_blocks = 0

    def sync_tables(self, seqs) -> None:
        """Blocks taken since the last sync into the device tables: a few entries per step, one copy."""
        new = [(s.slot, i, s.block_table[i]) for s in seqs for i in range(s.synced_blocks, len(s.block_table))]
        for s in seqs:
            s.synced_blocks = len(s.block_table)
        if new:
            rows, cols, blocks = upload(new, device=self.tables.device).unbind(1)
            self.tables[rows, cols] = blocks

    def locate(self, stream_slots: torch.Tensor, positions: torch.Tensor, one_per_stream: bool = False) -> None:
        """The step's rows (one per new token: its stream's slot and position) -> where each writes and reads.
        `one_per_stream` (decode): no row reads another's key, so attention may write them as it goes."""
        self.one_per_stream = one_per_stream
        tables = self.tables[stream_slots]
        blocks = tables.gather(1, (positions // self.block_size)[:, None])[:, 0]
        self.slot_mapping, self.block_tables = blocks * self.block_size + positions % self.block_size, tables
        self.context_lens = positions + 1

    def attend(self, layer: int, q, k, v, scale: float):
        return paged_attention(q, self.k[layer], self.v[layer], self.block_tables, self.context_lens, scale,
                               self.block_size, (k, v, self.slot_mapping), self.one_per_stream)
