"""The decoder layer's math and SnakeBeta as free functions; weights are arguments so one compile serves all layers
(a weight may be an fp8 pair: fp8_linear.linear)."""
import torch
import torch.nn.functional as F

from engine.kernels.fp8_linear import linear

BIAS_PAD = 8      # a GEMM's bias as a row of its weight over a column of ones; 8 keep K a multiple of 8


def rms_norm(x, weight, eps: float):
    dtype = x.dtype
    x = x.float()
    x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return weight * x.to(dtype)


def rotate(x, cos, sin):
    half = x.shape[-1] // 2
    return x * cos[:, None] + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin[:, None]


def attention_inputs(x, norm_w, w_qkv, q_size: int, q_norm_w, k_norm_w, cos, sin, eps: float, head_dim: int):
    n = x.shape[0]
    qkv = linear(rms_norm(x, norm_w, eps), w_qkv)
    kv_size = (qkv.shape[-1] - q_size) // 2
    q, k, v = qkv.split([q_size, kv_size, kv_size], dim=-1)
    q = rms_norm(q.reshape(n, -1, head_dim), q_norm_w, eps)
    k = rms_norm(k.reshape(n, -1, head_dim), k_norm_w, eps)
    return rotate(q, cos, sin), rotate(k, cos, sin), v.reshape(n, -1, head_dim)


def attention_output_and_mlp(x, attn, wo, norm_w, w_gate_up, w_down, eps: float):
    x = x + linear(attn, wo)
    gate, up = linear(rms_norm(x, norm_w, eps), w_gate_up).chunk(2, dim=-1)
    return x + linear(F.silu(gate) * up, w_down)


def snake_table(alpha, beta) -> torch.Tensor:
    """SnakeBeta's parameters (log scale) as the kernels take them, [2, C] in float32 or wider: exp(alpha),
    1 / (exp(beta) + eps)."""
    alpha, beta = (p.to(torch.promote_types(p.dtype, torch.float32)) for p in (alpha, beta))
    return torch.stack([alpha.exp(), 1.0 / (beta.exp() + 1e-9)])


def snake(x, table, bias=None, pad: int = 0):
    """`table`: snake_table's; `pad`: columns after the channels, the first 1 and the rest 0 (a GEMM's bias row)."""
    if bias is not None:
        x = x + bias
    y = x + (torch.sin(x * table[0]).pow(2) * table[1]).to(x.dtype)
    return torch.cat([y, y.new_ones(*y.shape[:-1], 1), y.new_zeros(*y.shape[:-1], pad - 1)], dim=-1) if pad else y


def snake_residual(x, h, table, h_bias, weight, bias, snake=snake):
    """x += snake(h + h_bias) @ weight^T + bias, in place: the bias rides the GEMM as a weight row, the residual is its
    accumulator. `snake`: the op that activates (the chosen kernel, with its bias column)."""
    h = snake(h, table, h_bias, BIAS_PAD)
    rows = torch.cat([weight.T, bias[None], bias.new_zeros(BIAS_PAD - 1, len(bias))])
    return torch.baddbmm(x, h, rows.expand(len(x), -1, -1), out=x)


def snake_after(history, x, table, bias=None):
    return torch.cat([history, snake(x, table, bias)], dim=1)
