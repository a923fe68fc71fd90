"""The Qwen3 decoder layer, shared by the talker, the code predictor and side models."""
from dataclasses import dataclass

import torch
from torch import nn

from engine.kernels.registry import ops


@dataclass
class LMConfig:
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rms_norm_eps: float
    rope_theta: float
    vocab_size: int

    @classmethod
    def from_dict(cls, d: dict) -> "LMConfig":
        return cls(d["hidden_size"], d["intermediate_size"], d["num_hidden_layers"], d["num_attention_heads"],
                   d["num_key_value_heads"], d.get("head_dim") or d["hidden_size"] // d["num_attention_heads"],
                   d.get("rms_norm_eps", 1e-6), d.get("rope_theta", 1e6), d["vocab_size"])


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ops.rms_norm(x, self.weight, self.eps)


class Rotary:
    """The talker's MRoPE with identical streams reduces to this 1-D RoPE."""

    def __init__(self, head_dim: int, theta: float, max_positions: int = 32768, device=None):
        inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64, device=device).float() / head_dim))
        freqs = torch.arange(max_positions, device=device).float()[:, None] * inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        self.cos, self.sin = emb.cos(), emb.sin()
        self.cast: dict = {}

    def table(self, dtype: torch.dtype, device) -> tuple[torch.Tensor, torch.Tensor]:
        if (dtype, device) not in self.cast:
            self.cast[dtype, device] = self.cos.to(device, dtype), self.sin.to(device, dtype)
        return self.cast[dtype, device]

    def __call__(self, positions: torch.Tensor, dtype: torch.dtype):
        cos, sin = self.table(dtype, positions.device)
        return cos[positions], sin[positions]


class Attention(nn.Module):
    def __init__(self, cfg: LMConfig, layer_idx: int):
        super().__init__()
        self.layer_idx = layer_idx
        self.num_heads, self.num_kv_heads, self.head_dim = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
        self.q_proj = nn.Linear(cfg.hidden_size, cfg.num_heads * cfg.head_dim, bias=False)
        self.k_proj = nn.Linear(cfg.hidden_size, cfg.num_kv_heads * cfg.head_dim, bias=False)
        self.v_proj = nn.Linear(cfg.hidden_size, cfg.num_kv_heads * cfg.head_dim, bias=False)
        self.o_proj = nn.Linear(cfg.num_heads * cfg.head_dim, cfg.hidden_size, bias=False)
        self.q_norm = RMSNorm(cfg.head_dim, cfg.rms_norm_eps)
        self.k_norm = RMSNorm(cfg.head_dim, cfg.rms_norm_eps)

class MLP(nn.Module):
    def __init__(self, hidden: int, intermediate: int):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)



def pack_views(*linears: nn.Linear) -> torch.Tensor:
    packed = torch.cat([lin.weight.data for lin in linears])
    start = 0
    for lin in linears:
        rows = lin.weight.shape[0]
        lin.weight.data = packed[start:start + rows]
        start += rows
    return packed


class DecoderLayer(nn.Module):
    def __init__(self, cfg: LMConfig, layer_idx: int):
        super().__init__()
        self.self_attn = Attention(cfg, layer_idx)
        self.mlp = MLP(cfg.hidden_size, cfg.intermediate_size)
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)

    @torch.no_grad()
    def pack(self) -> None:
        """The checkpoint's tensors become views into the packed weights."""
        a, m = self.self_attn, self.mlp
        self.w_qkv = pack_views(a.q_proj, a.k_proj, a.v_proj)
        self.w_gate_up = pack_views(m.gate_proj, m.up_proj)
        # widths as constants in the compiled layer math (rows stay dynamic): its pointwise kernels then vectorize
        for w in (self.w_qkv, self.w_gate_up, a.o_proj.weight, m.down_proj.weight, a.q_norm.weight, a.k_norm.weight,
                  self.input_layernorm.weight, self.post_attention_layernorm.weight):
            torch._dynamo.mark_static(w)

    def projections(self) -> tuple:
        """The weights of its projections (what --weights-dtype fp8 quantizes)."""
        return self.w_qkv, self.self_attn.o_proj.weight, self.w_gate_up, self.mlp.down_proj.weight

    def forward(self, x, cos, sin, kv):
        a, m = self.self_attn, self.mlp
        eps = self.input_layernorm.eps
        q, k, v = ops.attention_inputs(x, self.input_layernorm.weight, self.w_qkv, a.q_proj.weight.shape[0],
                                          a.q_norm.weight, a.k_norm.weight, cos, sin, eps, a.head_dim)
        o = kv.attend(a.layer_idx, q, k, v, a.head_dim ** -0.5)
        return ops.attention_output_and_mlp(x, o.reshape(x.shape[0], -1), a.o_proj.weight,
                                               self.post_attention_layernorm.weight, self.w_gate_up,
                                               m.down_proj.weight, eps)


class DecoderStack(nn.Module):

    def __init__(self, cfg: LMConfig):
        super().__init__()
        self.layers = nn.ModuleList(DecoderLayer(cfg, i) for i in range(cfg.num_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)

    def pack(self) -> None:
        for layer in self.layers:
            layer.pack()

    def forward(self, x, cos, sin, kv):
        for layer in self.layers:
            x = layer(x, cos, sin, kv)
        return self.norm(x)
