"""Where weights come from: a local checkpoint directory, a hub repo id, or random (dummy) weights."""
import json
from pathlib import Path

import torch
from safetensors.torch import load_file

from .config import ASSETS, VARIANTS
from .dummy import tiny_codec_config, tiny_tts_config


class ModelLoadError(RuntimeError):
    pass


def resolve_model_dir(model: str) -> Path:
    path = Path(model).expanduser()
    if path.is_dir():
        if not (path / "config.json").exists() or not (path / "speech_tokenizer" / "config.json").exists():
            raise ModelLoadError(f"{path} is not a Qwen3-TTS checkpoint directory "
                                 "(config.json and speech_tokenizer/config.json expected)")
        return path
    if path.exists() or model.count("/") != 1:
        raise ModelLoadError(f"model '{model}' is neither a checkpoint directory nor a hub repo id (owner/name); "
                             f"pass a downloaded checkpoint directory, or --dummy VARIANT for random weights")
    try:
        from huggingface_hub import snapshot_download
        return Path(snapshot_download(model))
    except Exception as exc:
        raise ModelLoadError(
            f"model '{model}' is not a local directory and could not be fetched from the hub ({exc.__class__.__name__}: "
            f"{exc}). Download it and pass its directory, or use --dummy VARIANT for random weights "
            f"(variants: tiny, {', '.join(VARIANTS)}).") from None


def dummy_configs(variant: str) -> tuple[dict, dict, dict]:
    """(config.json, speech_tokenizer/config.json, generation_config.json) dicts for --dummy VARIANT."""
    if variant == "tiny" or variant.startswith("tiny-"):
        base = variant[5:] or "1.7B-CustomVoice"
        return tiny_tts_config(base), tiny_codec_config(), _json(ASSETS / "models" / base / "generation_config.json")
    if variant not in VARIANTS:
        raise ModelLoadError(f"unknown dummy variant '{variant}'; choose tiny, tiny-<variant> or one of {', '.join(VARIANTS)}")
    d = ASSETS / "models" / variant
    cfg = _json(d / "config.json")
    cfg.pop("auto_map", None)
    return cfg, _json(d / "speech_tokenizer" / "config.json"), _json(d / "generation_config.json")


def _json(path: Path) -> dict:
    return json.loads(path.read_text())


def load_checkpoint(module: torch.nn.Module, directory: Path, skip_prefixes: tuple[str, ...] = ()) -> None:
    """Load every *.safetensors file of `directory` into `module` (names as published, no conversion)."""
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


def default_device_dtype(device=None, dtype=None) -> tuple[torch.device, torch.dtype]:
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if isinstance(dtype, str):
        dtype = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
                 "float16": torch.float16, "fp16": torch.float16}[dtype]
    return device, dtype or (torch.bfloat16 if device.type == "cuda" else torch.float32)
