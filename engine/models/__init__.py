"""The model families the engine serves, chosen in this one place by a checkpoint's `model_type`."""
import importlib
import json
from pathlib import Path

FAMILIES = {"qwen3_tts": "engine.models.qwen3_tts.model"}      # model_type -> the module with its load_model
DEFAULT_FAMILY = "qwen3_tts"        # random weights (--dummy) and hub ids, resolved by its loader


def family_of(model: str | None) -> str:
    config = Path(model).expanduser() / "config.json" if model else None
    if config is None or not config.exists():
        return DEFAULT_FAMILY
    model_type = json.loads(config.read_text()).get("model_type")
    if model_type not in FAMILIES:
        from engine.models.weights import ModelLoadError       # torch: not for a front end reading checks.py
        raise ModelLoadError(f"{model}: model_type {model_type!r} is not served; served: {', '.join(FAMILIES)}")
    return model_type


def load_model(model: str | None = None, dummy: str | None = None, **kwargs):
    return importlib.import_module(FAMILIES[family_of(model)]).load_model(model=model, dummy=dummy, **kwargs)
