"""Streaming codec decoder: every layer is causal, so frame-by-frame decoding from per-slot state is exact."""
import math

import torch
from torch import nn

from engine.kernels.registry import ops
from engine.models.qwen3_tts.codec.layers import CausalConv, CausalTransConv, ConvNeXtBlock, SnakeBeta, Stateful, channels_last
from engine.models.qwen3_tts.codec.quantizer import Dequantizer
from engine.models.qwen3_tts.codec.transformer import DecoderTransformer


class ResidualUnit(nn.Module):
    def __init__(self, dim: int, dilation: int):
        super().__init__()
        self.act1 = SnakeBeta(dim)
        self.conv1 = CausalConv(dim, dim, 7, dilation=dilation)
        self.act2 = SnakeBeta(dim)
        self.conv2 = CausalConv(dim, dim, 1)

    def forward(self, x: torch.Tensor, slots: torch.Tensor | None, bias: torch.Tensor | None = None) -> torch.Tensor:
        """Adds to x in place: the residual is the GEMM's accumulator, not a pass of its own. `bias`: x's own, not
        yet added (it rides the first SnakeBeta and the 1x1 conv's bias)."""
        h = self.conv1(x, slots, self.act1, with_bias=False, input_bias=bias)
        c = self.conv2.conv
        total = c.bias if bias is None else c.bias + bias
        return ops.snake_residual(x, h, self.act2.table, self.conv1.conv.bias, c.weight[:, :, 0], total)


class UpsampleBlock(nn.Module):

    def __init__(self, in_dim: int, out_dim: int, rate: int):
        super().__init__()
        self.block = nn.ModuleList([SnakeBeta(in_dim), CausalTransConv(in_dim, out_dim, 2 * rate, rate),
                                    *(ResidualUnit(out_dim, dilation) for dilation in (1, 3, 9))])

    def forward(self, x: torch.Tensor, slots: torch.Tensor | None) -> torch.Tensor:
        """The transposed conv's bias goes to the first unit, which adds it on its way (no pass of its own)."""
        trans_conv = self.block[1]
        bias = trans_conv.conv.bias.detach()          # a parameter as a module's argument trips torch's module tracker
        x = self.block[2](trans_conv(x, slots, self.block[0], with_bias=False), slots, bias)
        for unit in self.block[3:]:
            x = unit(x, slots)
        return x


class CodecDecoder(nn.Module):

    def __init__(self, config: dict, max_streams: int = 0):
        super().__init__()
        cfg = config["decoder_config"]
        latent, rates = cfg["latent_dim"], cfg["upsample_rates"]
        self.num_quantizers = cfg["num_quantizers"]
        self.samples_per_frame = math.prod(rates) * math.prod(cfg["upsampling_ratios"])
        self.quantizer = Dequantizer(cfg["num_quantizers"], cfg["codebook_size"], cfg["codebook_dim"] // 2,
                                     cfg["codebook_dim"])
        self.pre_conv = CausalConv(cfg["codebook_dim"], latent, 3)
        self.pre_transformer = DecoderTransformer(cfg)
        self.upsample = nn.ModuleList(nn.ModuleList([CausalTransConv(latent, latent, ratio, ratio),
                                                     ConvNeXtBlock(latent)])
                                      for ratio in cfg["upsampling_ratios"])
        dims = [cfg["decoder_dim"] // 2 ** i for i in range(len(rates) + 1)]
        self.decoder = nn.ModuleList([CausalConv(latent, dims[0], 7),
                                      *(UpsampleBlock(dims[i], dims[i + 1], rate) for i, rate in enumerate(rates)),
                                      SnakeBeta(dims[-1]), CausalConv(dims[-1], 1, 7)])
        self.allocate(max_streams)

    @property
    def max_streams(self) -> int:
        return self.pre_transformer.position.shape[0]

    def allocate(self, max_streams: int):
        weight = self.pre_conv.conv.weight
        for module in self.modules():
            if isinstance(module, Stateful):
                module.allocate(max_streams, weight.dtype, weight.device)

    @torch.no_grad()
    def pack(self) -> None:
        for module in self.modules():
            if isinstance(module, (nn.Conv1d, nn.ConvTranspose1d)):
                channels_last(module)
            elif isinstance(module, SnakeBeta):
                module.pack()

    def reset(self, slots: torch.Tensor):
        for module in self.modules():
            if isinstance(module, Stateful):
                module.reset(slots)

    @torch.no_grad()
    def decode(self, codes: torch.Tensor, slots: torch.Tensor | None) -> torch.Tensor:
        """slots None: fresh streams, no state touched."""
        x = self.pre_conv(self.quantizer(codes), slots)
        x = self.pre_transformer(x, slots)
        for trans_conv, convnext in self.upsample:
            x = convnext(trans_conv(x, slots), slots)
        x = self.decoder[0](x, slots)
        for block in self.decoder[1:-2]:
            x = block(x, slots)
        x = self.decoder[-1](x, slots, self.decoder[-2])
        return x.clamp(-1, 1).squeeze(2)

    def prime(self, codes: torch.Tensor, slots: torch.Tensor):
        """Context frames whose audio is not wanted (a clone's reference), as the reference's decode-and-cut."""
        self.decode(codes, slots)

    def _states(self) -> list[tuple[Stateful, str]]:
        return [(m, name) for m in self.modules() if isinstance(m, Stateful) for name in m.state_specs]

    # no timed algorithm search per reference length: slow on the engine thread, and its pick varies by process
    @torch.backends.cudnn.flags(enabled=True, benchmark=False)
    def primed_state(self, codes: torch.Tensor, slot: torch.Tensor) -> list[torch.Tensor]:
        """The state after context frames, primed in a scratch slot; new streams `load` it."""
        self.reset(slot)
        self.prime(codes[None], slot)
        return [getattr(m, name)[slot] for m, name in self._states()]

    def load(self, slots: torch.Tensor, states: list[torch.Tensor]):
        for (m, name), rows in zip(self._states(), states):
            ops.write_rows(getattr(m, name), slots, rows)

    def decode_all(self, codes: torch.Tensor) -> torch.Tensor:
        return self.decode(codes[None], None)[0]
