"""Split residual vector quantizers; encoder and decoder each keep the checkpoint's (different) names."""
import torch
import torch.nn.functional as F
from torch import nn


def codebook_entries(embedding_sum: torch.Tensor, cluster_usage: torch.Tensor) -> torch.Tensor:
    return embedding_sum / cluster_usage.clamp(min=1e-5)[:, None]


def _conv1x1(in_dim: int, out_dim: int) -> nn.Conv1d:
    return nn.Conv1d(in_dim, out_dim, 1, bias=False)


class _DecoderCodebook(nn.Module):
    def __init__(self, size: int, dim: int):
        super().__init__()
        self.register_buffer("cluster_usage", torch.ones(size))
        self.register_buffer("embedding_sum", torch.zeros(size, dim))


class _DecoderRVQ(nn.Module):
    def __init__(self, num_quantizers: int, size: int, dim: int, outer_dim: int):
        super().__init__()
        self.input_proj = _conv1x1(outer_dim, dim)      # part of the checkpoint
        self.output_proj = _conv1x1(dim, outer_dim)
        self.vq = nn.Module()
        self.vq.layers = nn.ModuleList(nn.Module() for _ in range(num_quantizers))
        for layer in self.vq.layers:
            layer._codebook = _DecoderCodebook(size, dim)


class Dequantizer(nn.Module):
    """`table` is refreshed after every load_state_dict."""

    def __init__(self, num_quantizers: int, size: int, dim: int, outer_dim: int):
        super().__init__()
        self.rvq_first = _DecoderRVQ(1, size, dim, outer_dim)
        self.rvq_rest = _DecoderRVQ(num_quantizers - 1, size, dim, outer_dim)
        self.register_buffer("table", self._entries(), persistent=False)
        self.register_load_state_dict_post_hook(lambda module, _: module.refresh())

    def refresh(self):
        self.table = self._entries()

    @torch.no_grad()
    def _entries(self) -> torch.Tensor:
        books = [layer._codebook for rvq in (self.rvq_first, self.rvq_rest) for layer in rvq.vq.layers]
        return torch.stack([codebook_entries(b.embedding_sum, b.cluster_usage) for b in books])

    def forward(self, codes: torch.Tensor) -> torch.Tensor:
        """codes [B, T, books] -> [B, T, outer_dim], channels-last."""
        entries = self.table[torch.arange(codes.shape[-1], device=codes.device), codes]
        first = F.linear(entries[:, :, 0], self.rvq_first.output_proj.weight[:, :, 0])
        return first + F.linear(entries[:, :, 1:].sum(2), self.rvq_rest.output_proj.weight[:, :, 0])


class _EncoderCodebook(nn.Module):
    def __init__(self, size: int, dim: int):
        super().__init__()
        self.register_buffer("initialized", torch.ones(1))
        self.register_buffer("cluster_usage", torch.ones(size))
        self.register_buffer("embed_sum", torch.zeros(size, dim))


class _EncoderRVQ(nn.Module):
    def __init__(self, num_quantizers: int, size: int, dim: int, outer_dim: int):
        super().__init__()
        projected = dim != outer_dim
        self.input_proj = _conv1x1(outer_dim, dim) if projected else nn.Identity()
        self.output_proj = _conv1x1(dim, outer_dim) if projected else nn.Identity()
        self.layers = nn.ModuleList(nn.Module() for _ in range(num_quantizers))
        for layer in self.layers:
            layer.codebook = _EncoderCodebook(size, dim)

    def encode(self, x: torch.Tensor, num_quantizers: int) -> torch.Tensor:
        residual = self.input_proj(x).transpose(1, 2).float()
        codes = []
        for layer in self.layers[:num_quantizers]:
            entries = codebook_entries(layer.codebook.embed_sum, layer.codebook.cluster_usage).float()
            flat = residual.reshape(1, -1, residual.shape[-1])
            index = torch.cdist(flat, entries[None])[0].argmin(-1).view(residual.shape[:-1])
            residual = residual - entries[index]
            codes.append(index)
        return torch.stack(codes, dim=-1)


class Quantizer(nn.Module):

    def __init__(self, num_quantizers: int, num_semantic: int, size: int, dim: int, outer_dim: int):
        super().__init__()
        self.num_semantic = num_semantic
        self.semantic_residual_vector_quantizer = _EncoderRVQ(num_semantic, size, dim, outer_dim)
        self.acoustic_residual_vector_quantizer = _EncoderRVQ(num_quantizers - num_semantic, size, dim, outer_dim)

    def forward(self, x: torch.Tensor, num_quantizers: int) -> torch.Tensor:
        semantic = self.semantic_residual_vector_quantizer.encode(x, self.num_semantic)
        acoustic = self.acoustic_residual_vector_quantizer.encode(x, num_quantizers - self.num_semantic)
        return torch.cat([semantic, acoustic], dim=-1)
