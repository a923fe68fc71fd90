"""The per-layer math of the Qwen3 decoder layer as free functions of tensors.

Eager on the CPU; on CUDA `enable_compile()` swaps in torch.compile'd versions of the very same functions,
which fuse each side of attention into a few kernels (norms, RoPE, residuals, SwiGLU). Weights are
arguments, so one compilation serves every layer of the same shape."""
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


def attention_inputs(x, norm_w, wq, wk, wv, q_norm_w, k_norm_w, cos, sin, eps: float, head_dim: int):
    """Pre-norm, q/k/v projections, per-head q/k RMSNorm, RoPE: x [N, H] -> q [N, h, d], k, v [N, kvh, d]."""
    n = x.shape[0]
    h = rms_norm(x, norm_w, eps)
    q = rms_norm(F.linear(h, wq).view(n, -1, head_dim), q_norm_w, eps)
    k = rms_norm(F.linear(h, wk).view(n, -1, head_dim), k_norm_w, eps)
    v = F.linear(h, wv).view(n, -1, head_dim)
    return rotate(q, cos, sin), rotate(k, cos, sin), v


def attention_output_and_mlp(x, attn, wo, norm_w, w_gate, w_up, w_down, eps: float):
    """Output projection + residual, then the pre-norm SwiGLU MLP + residual."""
    x = x + F.linear(attn, wo)
    h = rms_norm(x, norm_w, eps)
    return x + F.linear(F.silu(F.linear(h, w_gate)) * F.linear(h, w_up), w_down)


def snake(x, alpha, beta):
    """SnakeBeta over channels of [B, C, T]: x + sin^2(x e^alpha) / e^beta (parameters on log scale)."""
    return x + torch.sin(x * alpha.exp()[:, None]).pow(2) * (1.0 / (beta.exp()[:, None] + 1e-9))


_EAGER = dict(rms_norm=rms_norm, attention_inputs=attention_inputs,
              attention_output_and_mlp=attention_output_and_mlp, snake=snake)
ops = dict(_EAGER)


def register(name: str, fn) -> None:
    _EAGER[name] = ops[name] = fn


def enable_compile(on: bool = True) -> None:
    for name, fn in _EAGER.items():
        ops[name] = torch.compile(fn, dynamic=True) if on else fn
