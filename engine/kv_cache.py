"""Paged KV cache for the talker: a pool of fixed-size blocks and a block table per sequence.

Every new token (a prompt's during prefill, one per stream during decode) is a query row with its own block
table and context length; `attend` writes the rows' keys and values, then reads each row's live tokens only."""
from collections import deque

import torch

from .config import LMConfig
from .paged_attention import paged_attention


class PagedKVCache:
    def __init__(self, cfg: LMConfig, num_blocks: int, block_size: int, dtype, device):
        shape = (cfg.num_layers, num_blocks * block_size, cfg.num_kv_heads, cfg.head_dim)
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.block_size, self.num_blocks = block_size, num_blocks
        self.free_blocks = deque(range(num_blocks))

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

    def slot_of(self, seq, pos: int) -> int:
        return seq.block_table[pos // self.block_size] * self.block_size + pos % self.block_size

    def layout(self, seqs, new_tokens: list[int], max_blocks: int):
        """Host lists for sequence i appending new_tokens[i] tokens: per token its cache slot, its sequence's
        index and its context length (a token attends to its own prefix: causal prefill and decode alike),
        and per sequence its block table padded to max_blocks."""
        slots, owner, lens = [], [], []
        for i, (s, n) in enumerate(zip(seqs, new_tokens)):
            for pos in range(s.num_tokens, s.num_tokens + n):
                slots.append(self.slot_of(s, pos))
                owner.append(i)
                lens.append(pos + 1)
        tables = [s.block_table + [0] * (max_blocks - len(s.block_table)) for s in seqs]
        return slots, owner, tables, lens

    def set_layout(self, slot_mapping, block_tables, context_lens) -> None:
        """Device tensors of the step, one row per new token (static buffers when it runs in a CUDA graph)."""
        self.slot_mapping, self.block_tables, self.context_lens = slot_mapping, block_tables, context_lens

    def attend(self, layer: int, q, k, v, scale: float):
        self.k[layer, self.slot_mapping] = k
        self.v[layer, self.slot_mapping] = v
        return paged_attention(q, self.k[layer], self.v[layer], self.block_tables, self.context_lens, scale,
                               self.block_size)
