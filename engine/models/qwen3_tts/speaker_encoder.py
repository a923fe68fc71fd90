"""ECAPA-TDNN x-vector of a reference voice (Base models)."""
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from engine.models.qwen3_tts.log_mel import log_mel_spectrogram

DEFAULTS = dict(mel_dim=128, enc_dim=1024, enc_channels=[512, 512, 512, 512, 1536], enc_kernel_sizes=[5, 3, 3, 3, 1],
                enc_dilations=[1, 2, 3, 4, 1], enc_attention_channels=128, enc_res2net_scale=8, enc_se_channels=128)


def same_conv(cin: int, cout: int, kernel: int = 1, dilation: int = 1) -> nn.Conv1d:
    return nn.Conv1d(cin, cout, kernel, dilation=dilation, padding="same", padding_mode="reflect")


class TDNN(nn.Module):

    def __init__(self, cin: int, cout: int, kernel: int = 1, dilation: int = 1):
        super().__init__()
        self.conv = same_conv(cin, cout, kernel, dilation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.conv(x))


class Res2Net(nn.Module):

    def __init__(self, channels: int, scale: int, kernel: int, dilation: int):
        super().__init__()
        self.blocks = nn.ModuleList(TDNN(channels // scale, channels // scale, kernel, dilation)
                                    for _ in range(scale - 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        first, *rest = x.chunk(len(self.blocks) + 1, dim=1)
        outs = [first]
        for i, (block, group) in enumerate(zip(self.blocks, rest)):
            outs.append(block(group if i == 0 else group + outs[-1]))
        return torch.cat(outs, dim=1)


class SqueezeExcitation(nn.Module):

    def __init__(self, channels: int, squeeze: int):
        super().__init__()
        self.conv1 = same_conv(channels, squeeze)
        self.conv2 = same_conv(squeeze, channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate = torch.sigmoid(self.conv2(F.relu(self.conv1(x.mean(dim=2, keepdim=True)))))
        return x * gate


class SERes2NetBlock(nn.Module):

    def __init__(self, channels: int, scale: int, squeeze: int, kernel: int, dilation: int):
        super().__init__()
        self.tdnn1 = TDNN(channels, channels)
        self.res2net_block = Res2Net(channels, scale, kernel, dilation)
        self.tdnn2 = TDNN(channels, channels)
        self.se_block = SqueezeExcitation(channels, squeeze)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.se_block(self.tdnn2(self.res2net_block(self.tdnn1(x))))


def weighted_stats(x: torch.Tensor, weights: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    mean = (weights * x).sum(dim=2)
    var = (weights * (x - mean.unsqueeze(2)).square()).sum(dim=2)
    return mean, var.clamp(min=1e-12).sqrt()


class AttentiveStatsPooling(nn.Module):

    def __init__(self, channels: int, attention: int):
        super().__init__()
        self.tdnn = TDNN(3 * channels, attention)
        self.conv = same_conv(attention, channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        frames = x.shape[2]
        mean, std = weighted_stats(x, torch.full_like(x[:, :1], 1.0 / frames))
        context = torch.cat([x, mean.unsqueeze(2).expand_as(x), std.unsqueeze(2).expand_as(x)], dim=1)
        attention = torch.softmax(self.conv(torch.tanh(self.tdnn(context))), dim=2)
        return torch.cat(weighted_stats(x, attention), dim=1).unsqueeze(2)


class SpeakerEncoder(nn.Module):

    def __init__(self, config: dict):
        super().__init__()
        c = {**DEFAULTS, **config}
        channels, kernels, dilations = c["enc_channels"], c["enc_kernel_sizes"], c["enc_dilations"]
        self.blocks = nn.ModuleList([TDNN(c["mel_dim"], channels[0], kernels[0], dilations[0])])
        self.blocks.extend(SERes2NetBlock(channels[i], c["enc_res2net_scale"], c["enc_se_channels"], kernels[i],
                                          dilations[i]) for i in range(1, len(channels) - 1))
        self.mfa = TDNN(sum(channels[1:-1]), channels[-1], kernels[-1], dilations[-1])
        self.asp = AttentiveStatsPooling(channels[-1], c["enc_attention_channels"])
        self.fc = same_conv(2 * channels[-1], c["enc_dim"])

    def forward(self, mels: torch.Tensor) -> torch.Tensor:
        x = mels.transpose(1, 2)
        outs = []
        for block in self.blocks:
            x = block(x)
            outs.append(x)
        x = self.mfa(torch.cat(outs[1:], dim=1))
        return self.fc(self.asp(x)).squeeze(2)

    @torch.inference_mode()
    def embed(self, audio_24k: np.ndarray | torch.Tensor) -> torch.Tensor:
        audio = torch.as_tensor(audio_24k).to(torch.float32).reshape(1, -1)
        weight = self.fc.weight
        mels = log_mel_spectrogram(audio.to(weight.device)).transpose(1, 2)
        return self(mels.to(weight.dtype))[0]
