"""Paged KV cache for the talker: a pool of fixed-size blocks and a block table per sequence.

`attend` reads each sequence's keys through its block table. This torch path gathers the blocks into a
padded batch; a paged kernel replaces it on the GPU without changing the interface."""
from collections import deque

import torch
import torch.nn.functional as F

from .config import LMConfig
from .paged_attention import paged_decode


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

    def decode_layout(self, seqs, max_blocks: int):
        """Host lists for one decode token per sequence: (slot mapping, padded block tables, context lengths)."""
        slots = [self.slot_of(s, s.num_tokens) for s in seqs]
        tables = [s.block_table + [0] * (max_blocks - len(s.block_table)) for s in seqs]
        return slots, tables, [s.num_tokens + 1 for s in seqs]

    def set_decode(self, slot_mapping, block_tables, context_lens) -> None:
        """Device tensors of one decode step (static buffers when the step runs in a CUDA graph)."""
        self.decoding = True
        self.slot_mapping, self.block_tables, self.context_lens_t = slot_mapping, block_tables, context_lens

    def prepare(self, seqs, new_tokens: list[int]) -> None:
        """Set the step's layout: sequence i appends new_tokens[i] tokens after its num_tokens."""
        self.decoding = False
        device = self.k.device
        bs = self.block_size
        slots, self.context_lens = [], []
        for seq, n in zip(seqs, new_tokens):
            slots += [self.slot_of(seq, pos) for pos in range(seq.num_tokens, seq.num_tokens + n)]
            self.context_lens.append(seq.num_tokens + n)
        width = -(-max(self.context_lens) // bs)
        tables = [s.block_table + [0] * (width - len(s.block_table)) for s in seqs]
        self.slot_mapping = torch.tensor(slots, dtype=torch.int64, device=device)
        offsets = torch.arange(bs, device=device)
        blocks = torch.tensor(tables, dtype=torch.int64, device=device)
        self.key_index = (blocks[:, :, None] * bs + offsets).flatten(1)          # [B, width*bs]
        lens = torch.tensor(self.context_lens, device=device)
        news = torch.tensor(new_tokens, device=device)
        nmax = max(new_tokens)
        q_pos = (lens - news)[:, None] + torch.arange(nmax, device=device)[None]  # [B, nmax]
        k_pos = torch.arange(self.key_index.shape[1], device=device)
        self.mask = (k_pos[None, None] <= q_pos[:, :, None])[:, None]              # [B, 1, nmax, keys]
        self.q_valid = (torch.arange(nmax, device=device)[None] < news[:, None])   # [B, nmax]

    def attend(self, layer: int, q, k, v, scale: float):
        self.k[layer, self.slot_mapping] = k
        self.v[layer, self.slot_mapping] = v
        if self.decoding:
            return paged_decode(q, self.k[layer], self.v[layer], self.block_tables, self.context_lens_t, scale,
                                self.block_size)
        b, nmax = self.q_valid.shape
        query = q.new_zeros(b, nmax, *q.shape[1:])
        query[self.q_valid] = q
        keys = self.k[layer, self.key_index].transpose(1, 2)                       # [B, heads, keys, dim]
        values = self.v[layer, self.key_index].transpose(1, 2)
        o = F.scaled_dot_product_attention(query.transpose(1, 2), keys, values, attn_mask=self.mask,
                                           scale=scale, enable_gqa=True)
        return o.transpose(1, 2)[self.q_valid]
