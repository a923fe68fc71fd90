"""The aligner's audio encoder (`thinker.audio_tower.*`): log-mel -> 13 tokens per second of audio.

The mel is cut into 1 s chunks (100 frames); each chunk goes through three stride-2 convs and gets sinusoidal
positions restarting at 0; the tokens of an audio then attend bidirectionally within 8 s windows (104 tokens)."""
import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .config import AudioEncoderConfig
from .packed import Packed


def conv_out_len(n: int) -> int:
    return (n - 1) // 2 + 1


def chunk_tokens(frames: int) -> int:
    return conv_out_len(conv_out_len(conv_out_len(frames)))


def audio_tokens(frames: int, chunk: int = 100) -> int:
    """Tokens of an audio of `frames` mel frames: 13 per full chunk plus the tail chunk's."""
    return frames // chunk * chunk_tokens(chunk) + (chunk_tokens(frames % chunk) if frames % chunk else 0)


def sinusoids(length: int, channels: int) -> torch.Tensor:
    scales = torch.exp(-math.log(10000) / (channels // 2 - 1) * torch.arange(channels // 2).float())
    t = torch.arange(length)[:, None] * scales[None, :]
    return torch.cat([t.sin(), t.cos()], dim=1)


class EncoderAttention(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (nn.Linear(d, d) for _ in range(4))

    def forward(self, x: torch.Tensor, windows: Packed) -> torch.Tensor:
        q, k, v = (p(x).unflatten(-1, (self.heads, -1)) for p in (self.q_proj, self.k_proj, self.v_proj))
        return self.out_proj(windows.attend(q, k, v, q.shape[-1] ** -0.5, causal=False).flatten(1))


class EncoderLayer(nn.Module):
    def __init__(self, cfg: AudioEncoderConfig):
        super().__init__()
        self.self_attn = EncoderAttention(cfg.d_model, cfg.heads)
        self.self_attn_layer_norm = nn.LayerNorm(cfg.d_model)
        self.fc1 = nn.Linear(cfg.d_model, cfg.ffn_dim)
        self.fc2 = nn.Linear(cfg.ffn_dim, cfg.d_model)
        self.final_layer_norm = nn.LayerNorm(cfg.d_model)

    def forward(self, x: torch.Tensor, windows: Packed) -> torch.Tensor:
        x = x + self.self_attn(self.self_attn_layer_norm(x), windows)
        return x + self.fc2(F.gelu(self.fc1(self.final_layer_norm(x))))


class AudioEncoder(nn.Module):
    def __init__(self, cfg: AudioEncoderConfig):
        super().__init__()
        self.cfg, c, d = cfg, cfg.downsample_hidden, cfg.d_model
        self.chunk = 2 * cfg.n_window
        self.window = chunk_tokens(self.chunk) * (cfg.n_window_infer // self.chunk)
        self.conv2d1 = nn.Conv2d(1, c, 3, 2, padding=1)
        self.conv2d2 = nn.Conv2d(c, c, 3, 2, padding=1)
        self.conv2d3 = nn.Conv2d(c, c, 3, 2, padding=1)
        self.conv_out = nn.Linear(c * chunk_tokens(cfg.num_mel_bins), d, bias=False)
        self.register_buffer("positions", sinusoids(chunk_tokens(self.chunk), d), persistent=False)
        self.layers = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.layers))
        self.ln_post = nn.LayerNorm(d)
        self.proj1 = nn.Linear(d, d)
        self.proj2 = nn.Linear(d, cfg.output_dim)

    def _downsample(self, chunks: torch.Tensor, frames: list[int]) -> torch.Tensor:
        """[chunks, mels, T] (zero padded to T) -> the valid tokens of every chunk, packed."""
        x = F.gelu(self.conv2d3(F.gelu(self.conv2d2(F.gelu(self.conv2d1(chunks[:, None]))))))
        x = self.conv_out(x.permute(0, 3, 1, 2).flatten(2)) + self.positions[:x.shape[-1]].to(x.dtype)
        valid = torch.arange(x.shape[1])[None, :] < torch.tensor([chunk_tokens(f) for f in frames])[:, None]
        return x[valid.to(x.device)]

    def forward(self, mels: list[torch.Tensor]) -> list[torch.Tensor]:
        """[mels, frames] per audio -> [audio_tokens(frames), output_dim] per audio. Chunks are zero padded to 1 s
        (a padded conv leaks into the tail's last tokens, as in the reference), except an audio shorter than 1 s,
        which is its own unpadded chunk."""
        pieces, frames, singles = [], [], {}
        for i, mel in enumerate(mels):
            n = mel.shape[1]
            if n < self.chunk:
                singles[i] = self._downsample(mel[None], [n])
                continue
            frames += [min(self.chunk, n - start) for start in range(0, n, self.chunk)]
            pieces.append(F.pad(mel, (0, -n % self.chunk)).unflatten(1, (-1, self.chunk)).transpose(0, 1))
        padded = self._downsample(torch.cat(pieces), frames) if pieces else None
        tokens, at = [], 0
        for i, mel in enumerate(mels):
            if i in singles:
                tokens.append(singles[i])
            else:
                n = audio_tokens(mel.shape[1], self.chunk)
                tokens.append(padded[at:at + n])
                at += n
        lengths = [len(t) for t in tokens]
        windows = Packed([min(self.window, n - s) for n in lengths for s in range(0, n, self.window)], mels[0].device)
        x = torch.cat(tokens)
        for layer in self.layers:
            x = layer(x, windows)
        x = self.proj2(F.gelu(self.proj1(self.ln_post(x))))
        return list(x.split(lengths))
