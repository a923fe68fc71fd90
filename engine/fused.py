"""The per-layer math of the Qwen3 decoder layer as free functions of tensors.

Eager on the CPU; on CUDA `enable_compile()` swaps in torch.compile'd versions of the very same functions,
which fuse each side of attention into a few kernels (norms, RoPE, residuals, SwiGLU), behind hand-written kernels
registered for some (skinny.py for a few rows, codec/snake.py). Weights are arguments, so one compilation serves
every layer of the same shape."""
import torch
import torch.nn.functional as F


def rms_norm(x, weight, eps: float):
    dtype = x.dtype
    x = x.float()
    x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return weight * x.to(dtype)


def rotate(x, cos, sin):
    half = x.shape[-1] // 2
    return x * cos[:, None] + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin[:, None]


def attention_inputs(x, norm_w, w_qkv, q_size: int, q_norm_w, k_norm_w, cos, sin, eps: float, head_dim: int):
    """Pre-norm, packed q/k/v projection, per-head q/k RMSNorm, RoPE: x [N, H] -> q [N, h, d], k, v [N, kvh, d]."""
    n = x.shape[0]
    kv_size = (w_qkv.shape[0] - q_size) // 2
    q, k, v = F.linear(rms_norm(x, norm_w, eps), w_qkv).split([q_size, kv_size, kv_size], dim=-1)
    q = rms_norm(q.reshape(n, -1, head_dim), q_norm_w, eps)
    k = rms_norm(k.reshape(n, -1, head_dim), k_norm_w, eps)
    return rotate(q, cos, sin), rotate(k, cos, sin), v.reshape(n, -1, head_dim)


def attention_output_and_mlp(x, attn, wo, norm_w, w_gate_up, w_down, eps: float):
    """Output projection + residual, then the pre-norm SwiGLU MLP (packed gate/up) + residual."""
    x = x + F.linear(attn, wo)
    gate, up = F.linear(rms_norm(x, norm_w, eps), w_gate_up).chunk(2, dim=-1)
    return x + F.linear(F.silu(gate) * up, w_down)


def snake(x, alpha, beta, bias=None):
    """SnakeBeta over the channels of [B, T, C]: x + sin^2(x e^alpha) / e^beta (parameters on log scale),
    of x + bias when a conv's bias is left to it."""
    if bias is not None:
        x = x + bias
    return x + torch.sin(x * alpha.exp()).pow(2) * (1.0 / (beta.exp() + 1e-9))


def snake_after(history, x, alpha, beta):
    """[history, snake(x)] along time: a causal conv's input with its carried past, in one pass."""
    return torch.cat([history, snake(x, alpha, beta)], dim=1)


_EAGER = dict(rms_norm=rms_norm, attention_inputs=attention_inputs,
              attention_output_and_mlp=attention_output_and_mlp, snake=snake, snake_after=snake_after)
ops = dict(_EAGER)
_KERNELS: dict = {}     # hand-written kernels tried before a compiled function: NotImplemented means "not here"


def register(name: str, fn) -> None:
    _EAGER[name] = ops[name] = fn


def register_kernel(name: str, fn) -> None:
    _KERNELS[name] = fn


def _kernel_first(kernel, compiled):
    def call(*args):
        out = kernel(*args)
        return compiled(*args) if out is NotImplemented else out
    return call


def enable_compile(on: bool = True) -> None:
    # one function serves layers of several widths and strides (the codec's snake): allow the variants
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 64)
    torch._dynamo.config.accumulated_recompile_limit = max(torch._dynamo.config.accumulated_recompile_limit, 1024)
    for name, fn in _EAGER.items():
        compiled = torch.compile(fn, dynamic=True)
        ops[name] = (_kernel_first(_KERNELS[name], compiled) if name in _KERNELS else compiled) if on else fn
