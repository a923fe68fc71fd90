"""Transformer layers of the codec and the decoder's streaming stack."""
import torch
import torch.nn.functional as F
from torch import nn

from engine.models.qwen3_tts.codec.attention import Attention, attention_mask, rope_cos_sin, rope_inv_freq
from engine.models.qwen3_tts.codec.layers import Stateful


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.float()       # as the reference computes it
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(x.dtype)


class LayerScale(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.scale * x


class SwiGLU(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.gate_proj = nn.Linear(dim, hidden, bias=False)
        self.up_proj = nn.Linear(dim, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class GeluMLP(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden, bias=False)
        self.fc2 = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x)))


class TransformerLayer(nn.Module):
    def __init__(self, self_attn: Attention, mlp: nn.Module, input_layernorm: nn.Module,
                 post_attention_layernorm: nn.Module, dim: int):
        super().__init__()
        self.self_attn = self_attn
        self.mlp = mlp
        self.input_layernorm = input_layernorm
        self.post_attention_layernorm = post_attention_layernorm
        self.self_attn_layer_scale = LayerScale(dim)
        self.mlp_layer_scale = LayerScale(dim)

    def forward(self, x, cos, sin, mask, slots, positions=None):
        x = x + self.self_attn_layer_scale(self.self_attn(self.input_layernorm(x), cos, sin, mask, slots, positions))
        return x + self.mlp_layer_scale(self.mlp(self.post_attention_layernorm(x)))


class DecoderTransformer(Stateful):

    def __init__(self, cfg: dict):
        super().__init__()
        dim, eps, self.window = cfg["hidden_size"], cfg["rms_norm_eps"], cfg["sliding_window"]
        self.layers = nn.ModuleList(
            TransformerLayer(Attention(dim, cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"],
                                       cfg["attention_bias"], self.window),
                             SwiGLU(dim, cfg["intermediate_size"]), RMSNorm(dim, eps), RMSNorm(dim, eps), dim)
            for _ in range(cfg["num_hidden_layers"]))
        self.norm = RMSNorm(dim, eps)
        self.input_proj = nn.Linear(cfg["latent_dim"], dim)
        self.output_proj = nn.Linear(dim, cfg["latent_dim"])
        self.head_dim, self.rope_theta = cfg["head_dim"], cfg["rope_theta"]
        self.add_state("position", (), torch.long)

    def forward(self, x: torch.Tensor, slots: torch.Tensor | None) -> torch.Tensor:
        x = self.input_proj(x)
        start = self.read_state("position", slots, x)
        query_pos = start[:, None] + torch.arange(x.shape[1], device=x.device)
        mask = None                                          # a step: each layer attends in its ring in place
        if x.shape[1] > 1 or slots is None or self.layers[0].self_attn.grouped:
            size = self.window                               # ring entry j holds the last frame before start ≡ j
            ring_pos = start[:, None] - 1 - (start[:, None] - 1 - torch.arange(size, device=x.device)) % size
            mask = attention_mask(query_pos, torch.cat([ring_pos, query_pos], dim=1), self.window)
        cos, sin = rope_cos_sin(query_pos, rope_inv_freq(self.head_dim, self.rope_theta, x.device), x.dtype)
        for layer in self.layers:
            x = layer(x, cos, sin, mask, slots, query_pos)
        self.write_state("position", slots, start + x.shape[1])
        return self.output_proj(self.norm(x))
