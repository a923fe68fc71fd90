"""Codec encoder for reference audio (the Mimi encoder), one-shot."""
import math

import torch
import torch.nn.functional as F
from torch import nn

from engine.models.qwen3_tts.codec.attention import Attention, attention_mask, rope_cos_sin, rope_inv_freq
from engine.models.qwen3_tts.codec.quantizer import Quantizer
from engine.models.qwen3_tts.codec.transformer import GeluMLP, TransformerLayer


class PaddedConv(nn.Module):
    """Causal Conv1d padded on the left, and on the right just enough to fill the last stride."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1, dilation: int = 1,
                 bias: bool = True, pad_mode: str = "constant"):
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size, stride, dilation=dilation, bias=bias)
        self.left = (kernel_size - 1) * dilation + 1 - stride
        self.stride = stride
        self.pad_mode = pad_mode

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(F.pad(x, (self.left, -x.shape[-1] % self.stride), mode=self.pad_mode))


class ResnetBlock(nn.Module):
    def __init__(self, dim: int, hidden: int, kernel_size: int, dilation: int):
        super().__init__()
        self.block = nn.Sequential(nn.ELU(), PaddedConv(dim, hidden, kernel_size, dilation=dilation),
                                   nn.ELU(), PaddedConv(hidden, dim, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.block(x)


class SEANet(nn.Module):

    def __init__(self, cfg: dict):
        super().__init__()
        channels = cfg["num_filters"]
        layers = [PaddedConv(cfg["audio_channels"], channels, cfg["kernel_size"])]
        for ratio in reversed(cfg["upsampling_ratios"]):
            layers += [ResnetBlock(channels, channels // cfg["compress"], cfg["residual_kernel_size"],
                                   cfg["dilation_growth_rate"] ** j) for j in range(cfg["num_residual_layers"])]
            layers += [nn.ELU(), PaddedConv(channels, 2 * channels, 2 * ratio, stride=ratio)]
            channels *= 2
        layers += [nn.ELU(), PaddedConv(channels, cfg["hidden_size"], cfg["last_kernel_size"])]
        self.layers = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


class EncoderTransformer(nn.Module):
    """Attends the full past: the config's sliding window is ignored, as in the official (Mimi) encoder."""

    def __init__(self, cfg: dict):
        super().__init__()
        dim, eps = cfg["hidden_size"], cfg["norm_eps"]
        self.head_dim, self.rope_theta = cfg["head_dim"], cfg["rope_theta"]
        self.layers = nn.ModuleList(
            TransformerLayer(Attention(dim, cfg["num_attention_heads"], cfg["num_key_value_heads"], self.head_dim,
                                       cfg["attention_bias"]),
                             GeluMLP(dim, cfg["intermediate_size"]), nn.LayerNorm(dim, eps), nn.LayerNorm(dim, eps),
                             dim)
            for _ in range(cfg["num_hidden_layers"]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(x.shape[1], device=x.device)[None]
        mask = attention_mask(positions, positions, None)
        cos, sin = rope_cos_sin(positions, rope_inv_freq(self.head_dim, self.rope_theta, x.device), x.dtype)
        for layer in self.layers:
            x = layer(x, cos, sin, mask, None)
        return x


class CodecEncoder(nn.Module):

    def __init__(self, config: dict):
        super().__init__()
        cfg = config["encoder_config"]
        hidden = cfg["hidden_size"]
        self.num_quantizers = config["encoder_valid_num_quantizers"]
        self.samples_per_frame = config["encode_downsample_rate"]
        self.encoder = SEANet(cfg)
        self.encoder_transformer = EncoderTransformer(cfg)
        stride = self.samples_per_frame // math.prod(cfg["upsampling_ratios"])
        self.downsample = PaddedConv(hidden, hidden, 2 * stride, stride, bias=False, pad_mode="replicate")
        self.quantizer = Quantizer(cfg["num_quantizers"], cfg["num_semantic_quantizers"], cfg["codebook_size"],
                                   cfg["vector_quantization_hidden_dimension"], hidden)

    @torch.no_grad()
    def encode(self, wav: torch.Tensor) -> torch.Tensor:
        weight = self.encoder.layers[0].conv.weight
        x = self.encoder(wav.to(weight.device, weight.dtype)[None, None])
        x = self.encoder_transformer(x.transpose(1, 2)).transpose(1, 2)
        codes = self.quantizer(self.downsample(x), self.num_quantizers)[0]
        return codes[:-(-wav.shape[-1] // self.samples_per_frame)]
