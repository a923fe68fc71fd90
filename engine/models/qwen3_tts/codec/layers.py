"""Causal conv blocks of the codec decoder, channels-last [B, T, C], continuing each stream from per-slot state."""
import torch
import torch.nn.functional as F
from torch import nn

from engine.kernels.layer_math import snake_table
from engine.kernels.registry import ops


class Stateful(nn.Module):

    def __init__(self):
        super().__init__()
        self.state_specs: dict[str, tuple[tuple[int, ...], torch.dtype | None]] = {}

    def add_state(self, name: str, shape: tuple[int, ...], dtype: torch.dtype | None = None):
        self.state_specs[name] = (tuple(shape), dtype)
        self.register_buffer(name, torch.zeros(0, *shape, dtype=dtype or torch.float32), persistent=False)

    def allocate(self, num_slots: int, dtype: torch.dtype, device: torch.device):
        for name, (shape, own_dtype) in self.state_specs.items():
            setattr(self, name, torch.zeros(num_slots, *shape, dtype=own_dtype or dtype, device=device))

    def reset(self, slots: torch.Tensor):
        for name in self.state_specs:
            getattr(self, name).index_fill_(0, slots, 0)

    def read_state(self, name: str, slots: torch.Tensor | None, like: torch.Tensor, last: int | None = None
                   ) -> torch.Tensor:
        """`last`: only the state's last rows, gathered into a tensor of their own."""
        shape, dtype = self.state_specs[name]
        if slots is None:
            shape = shape if last is None else (last, *shape[1:])
            return torch.zeros(like.shape[0], *shape, dtype=dtype or like.dtype, device=like.device)
        state = getattr(self, name)
        return state[slots] if last is None or last == shape[0] else state[slots, shape[0] - last:]

    def write_state(self, name: str, slots: torch.Tensor | None, value: torch.Tensor):
        if slots is not None:
            ops.write_rows(getattr(self, name), slots, value)

    def conv_input(self, x: torch.Tensor, slots: torch.Tensor | None, act: "SnakeBeta | None", lead: int = 0,
                   bias: torch.Tensor | None = None) -> torch.Tensor:
        """act(x + bias) behind the carried history (and `lead` older steps) in one fused pass; its tail becomes the
        new history."""
        if not self.context:
            return x if act is None else act(x)
        history = self.read_state("history", slots, x, self.context + lead)
        x = ops.snake_after(history, x, act.table, bias) if act is not None else torch.cat([history, x], 1)
        kept = self.state_specs["history"][0][0]
        self.write_state("history", slots, x[:, x.shape[1] - kept:])
        return x


def channels_last(conv: nn.Module) -> None:
    w = conv.weight.data
    conv.weight.data = w.permute(0, 2, 1).contiguous().permute(0, 2, 1)


class CausalConv(Stateful):
    """A dilated conv's input is made a whole number of dilations long, older steps in front, and their outputs
    dropped: ops.conv may then run it as an undilated conv over its phases (cuDNN's dilated kernels are slower)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, dilation: int = 1, groups: int = 1):
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size, dilation=dilation, groups=groups)
        self.context = (kernel_size - 1) * dilation
        if self.context:
            self.add_state("history", (self.context + dilation - 1, in_channels))

    def forward(self, x: torch.Tensor, slots: torch.Tensor | None, act: "SnakeBeta | None" = None,
                with_bias: bool = True, input_bias: torch.Tensor | None = None) -> torch.Tensor:
        """with_bias=False leaves the bias to the caller to fuse (cuDNN adds it in a separate, slow pass);
        input_bias: the previous layer's, added before `act`."""
        c = self.conv
        lead = -x.shape[1] % c.dilation[0]
        x = self.conv_input(x, slots, act, lead, input_bias)
        bias = c.bias if with_bias else None
        if c.kernel_size[0] == 1 and c.groups == 1:
            return F.linear(x, c.weight[:, :, 0], bias)
        y = ops.conv(x, c.weight, bias, c.dilation[0], c.groups)
        return y[:, lead:] if lead else y


class CausalTransConv(Stateful):
    """Trimmed so output i depends on inputs <= i; overlapping earlier inputs are carried."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int):
        super().__init__()
        self.conv = nn.ConvTranspose1d(in_channels, out_channels, kernel_size, stride=stride)
        self.stride = stride
        self.context = -(-kernel_size // stride) - 1
        if self.context:
            self.add_state("history", (self.context, in_channels))

    def forward(self, x: torch.Tensor, slots: torch.Tensor | None, act: "SnakeBeta | None" = None,
                with_bias: bool = True) -> torch.Tensor:
        x = self.conv_input(x, slots, act)
        return ops.trans_conv(x, self.conv.weight, self.conv.bias if with_bias else None, self.stride, self.context)


class SnakeBeta(nn.Module):

    def __init__(self, channels: int):
        super().__init__()
        self.alpha = nn.Parameter(torch.zeros(channels))
        self.beta = nn.Parameter(torch.zeros(channels))
        self.register_buffer("table", torch.zeros(2, channels), persistent=False)
        self.register_load_state_dict_post_hook(lambda module, _: module.pack())

    @torch.no_grad()
    def pack(self) -> None:
        """After its parameters change (a load does it): the kernels' table of them, in place where it can be (a
        captured graph holds its address)."""
        table = snake_table(self.alpha, self.beta)
        if table.dtype == self.table.dtype and table.device == self.table.device:
            self.table.copy_(table)
        else:
            self.table = table

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ops.snake(x, self.table)


class ConvNeXtBlock(nn.Module):

    def __init__(self, dim: int):
        super().__init__()
        self.dwconv = CausalConv(dim, dim, 7, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.pwconv1 = nn.Linear(dim, 4 * dim)
        self.pwconv2 = nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(torch.zeros(dim))

    def forward(self, x: torch.Tensor, slots: torch.Tensor | None) -> torch.Tensor:
        h = self.pwconv2(F.gelu(self.pwconv1(self.norm(self.dwconv(x, slots)))))
        return x + self.gamma * h
