"""Loading safetensors checkpoints, seeded random weights, the default device and dtype."""
import math
from contextlib import contextmanager
from pathlib import Path

import torch
from safetensors.torch import load_file


class ModelLoadError(RuntimeError):
    pass


def load_checkpoint(module: torch.nn.Module, directory: Path, skip_prefixes: tuple[str, ...] = ()) -> None:
    files = sorted(directory.glob("*.safetensors"))
    if not files:
        raise ModelLoadError(f"no *.safetensors weights in {directory}")
    state = {}
    for f in files:
        state.update({k: v for k, v in load_file(str(f)).items() if not k.startswith(skip_prefixes)})
    missing, unexpected = module.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise ModelLoadError(f"weights in {directory} do not fit the model: missing {missing[:8]}, "
                             f"unexpected {unexpected[:8]}")


@contextmanager
def without_init():
    """Modules built without their own random init, for weights that are all loaded or seeded after it: work thrown
    away, seconds for a checkpoint's model on the CPU (torch.nn.init's functions do nothing meanwhile)."""
    names = [n for n in dir(torch.nn.init) if n.endswith("_") and not n.startswith("_")]
    saved = {n: getattr(torch.nn.init, n) for n in names}
    for n in names:
        setattr(torch.nn.init, n, lambda tensor, *args, **kwargs: tensor)
    try:
        yield
    finally:
        for n, fn in saved.items():
            setattr(torch.nn.init, n, fn)


def default_device_dtype(device=None, dtype=None) -> tuple[torch.device, torch.dtype]:
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ModelLoadError(
            f"--device {device} but this torch ({torch.__version__}) has no CUDA build; install torch's CUDA build "
            f"(README: Running on a GPU) or pass --device cpu" if torch.version.cuda is None else
            f"--device {device} but CUDA sees no GPU (torch {torch.__version__}); check nvidia-smi and the driver, "
            f"CUDA_VISIBLE_DEVICES, or pass --device cpu")
    if isinstance(dtype, str):
        dtype = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
                 "float16": torch.float16, "fp16": torch.float16}[dtype]
    return device, dtype or (torch.bfloat16 if device.type == "cuda" else torch.float32)


@torch.no_grad()
def seed_weights(module: torch.nn.Module, seed: int) -> None:
    """Scaled so activations stay O(1)."""
    g = None
    for name, p in sorted(module.state_dict(keep_vars=True).items()):
        if not p.is_floating_point():
            continue
        leaf = name.rsplit(".", 1)[-1]
        if g is None or g.device != p.device:
            g = torch.Generator(p.device).manual_seed(seed)
        r = torch.randn(p.shape, generator=g, dtype=torch.float32, device=p.device)
        if leaf == "cluster_usage":
            v = 0.5 + torch.rand(p.shape, generator=g, device=p.device)
        elif leaf in ("alpha", "beta"):
            v = 0.3 * r
        elif leaf == "scale":
            v = 0.5 + 0.1 * r
        elif leaf == "gamma":
            v = 0.5 + 0.1 * r
        elif "norm" in name and leaf == "weight" or leaf == "weight" and p.dim() == 1:
            v = 1.0 + 0.1 * r
        elif leaf == "bias" or p.dim() == 1:
            v = 0.05 * r
        elif leaf == "embedding_sum" or "embedding" in name:
            v = r
        else:
            fan_in = p[0].numel() if p.dim() > 1 else 1
            v = r / math.sqrt(fan_in)
            if p.dim() == 3 and p.shape[0] == 1:           # keep audio inside the clamp
                v = v * 0.015
        p.copy_(v.to(p.dtype))
