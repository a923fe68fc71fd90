"""The aligner's audio encoder (`thinker.audio_tower.*`): log-mel -> 13 tokens per second of audio."""
import math

import torch
import torch.nn.functional as F
from torch import nn

from engine.models.qwen3 import pack_views

from . import front_end as front_ends
from .config import AudioEncoderConfig
from .front_end import conv_out_len
from .packed import additive

CHUNK, SLOTS = 100, 8                  # mel frames per chunk, chunks per attention window
TOKENS = 13 * SLOTS                    # 13 tokens per chunk
CONV_SLOTS = 32                        # chunks per conv pass: bounds the front end's activations


def chunk_tokens(frames: int) -> int:
    return conv_out_len(conv_out_len(conv_out_len(frames)))


def audio_tokens(frames: int) -> int:
    return frames // CHUNK * chunk_tokens(CHUNK) + (chunk_tokens(frames % CHUNK) if frames % CHUNK else 0)


def sinusoids(length: int, channels: int) -> torch.Tensor:
    scales = torch.exp(-math.log(10000) / (channels // 2 - 1) * torch.arange(channels // 2).float())
    t = torch.arange(length)[:, None] * scales[None, :]
    return torch.cat([t.sin(), t.cos()], dim=1)


class EncoderAttention(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (nn.Linear(d, d) for _ in range(4))

    @torch.no_grad()
    def pack(self) -> None:
        """One weight and bias for q/k/v (the checkpoint's weights become views into it)."""
        self.w_qkv = pack_views(self.q_proj, self.k_proj, self.v_proj)
        self.b_qkv = torch.cat([self.q_proj.bias, self.k_proj.bias, self.v_proj.bias])

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        q, k, v = F.linear(x, self.w_qkv, self.b_qkv).unflatten(-1, (3, self.heads, -1)).permute(2, 0, 3, 1, 4)
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.out_proj(o.transpose(1, 2).flatten(2))


class EncoderLayer(nn.Module):
    def __init__(self, cfg: AudioEncoderConfig):
        super().__init__()
        self.self_attn = EncoderAttention(cfg.d_model, cfg.heads)
        self.self_attn_layer_norm = nn.LayerNorm(cfg.d_model)
        self.fc1 = nn.Linear(cfg.d_model, cfg.ffn_dim)
        self.fc2 = nn.Linear(cfg.ffn_dim, cfg.d_model)
        self.final_layer_norm = nn.LayerNorm(cfg.d_model)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = x + self.self_attn(self.self_attn_layer_norm(x), mask)
        return x + self.fc2(F.gelu(self.fc1(self.final_layer_norm(x))))


class AudioEncoder(nn.Module):
    def __init__(self, cfg: AudioEncoderConfig):
        super().__init__()
        if 2 * cfg.n_window != CHUNK or cfg.n_window_infer != CHUNK * SLOTS:
            raise ValueError(f"audio encoder windows {cfg.n_window}/{cfg.n_window_infer}: only 50/800 are supported")
        self.cfg, c, d = cfg, cfg.downsample_hidden, cfg.d_model
        self.conv2d1 = nn.Conv2d(1, c, 3, 2, padding=1)
        self.conv2d2 = nn.Conv2d(c, c, 3, 2, padding=1)
        self.conv2d3 = nn.Conv2d(c, c, 3, 2, padding=1)
        self.conv_out = nn.Linear(c * chunk_tokens(cfg.num_mel_bins), d, bias=False)
        self.register_buffer("positions", sinusoids(chunk_tokens(CHUNK), d), persistent=False)
        self.layers = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.layers))
        self.ln_post = nn.LayerNorm(d)
        self.proj1 = nn.Linear(d, d)
        self.proj2 = nn.Linear(d, cfg.output_dim)
        self.front_end, self.front_weights = "cudnn", ()

    def pack(self, front_end: str = front_ends.DEFAULT) -> None:
        for layer in self.layers:
            layer.self_attn.pack()
        self.front_weights, self.front_end = front_ends.pack(self, front_end), front_end

    def downsample(self, chunks: torch.Tensor, frames: torch.Tensor) -> torch.Tensor:
        """[n, mel, 100] log-mel chunks with `frames` real frames each -> [n, 13, d]."""
        return front_ends.RUN[self.front_end](self, chunks, frames)

    def forward(self, x: torch.Tensor, windows: torch.Tensor, conv_frames: torch.Tensor | None = None,
                layers: slice = slice(None)) -> torch.Tensor:
        if conv_frames is not None:
            chunks, frames = x.flatten(0, 1), conv_frames.flatten()
            x = torch.cat([self.downsample(chunks[i:i + CONV_SLOTS], frames[i:i + CONV_SLOTS])
                           for i in range(0, len(chunks), CONV_SLOTS)]).view(len(x), TOKENS, -1)
        mask = additive((windows[:, :, None] == windows[:, None, :])[:, None], x.dtype)
        for layer in self.layers[layers]:
            x = layer(x, mask)
        if layers.stop is not None and layers.stop < len(self.layers):
            return x
        return self.proj2(F.gelu(self.proj1(self.ln_post(x))))
