"""Qwen3-TTS weights: a checkpoint directory, a hub repo id, or dummy configs (`tiny`: published ids, small widths)."""
import copy
import json
from pathlib import Path

from engine.models.qwen3_tts import VARIANTS
from engine.models.qwen3_tts.config import ASSETS
from engine.models.weights import ModelLoadError


def tiny_tts_config(variant: str = "1.7B-CustomVoice") -> dict:
    cfg = json.loads((ASSETS / "models" / variant / "config.json").read_text())
    cfg.pop("auto_map", None)
    t = cfg["talker_config"]
    small = cfg["tts_model_size"] == "0b6"      # 0.6B: predictor width == talker width
    hidden = 32 if small else 64
    t.update(hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, head_dim=16, text_hidden_size=32,
             rope_scaling={"interleaved": True, "mrope_section": [2, 3, 3], "rope_type": "default", "type": "default"})
    t["code_predictor_config"].update(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, head_dim=8, layer_types=["full_attention"] * 2)
    if "speaker_encoder_config" in cfg:
        cfg["speaker_encoder_config"].update(enc_dim=hidden, enc_channels=[16, 16, 16, 16, 48],
                                             enc_attention_channels=8, enc_res2net_scale=4, enc_se_channels=8)
    return cfg


def tiny_codec_config() -> dict:
    cfg = json.loads((ASSETS / "models" / "1.7B-Base" / "speech_tokenizer" / "config.json").read_text())
    cfg["decoder_config"].update(latent_dim=48, codebook_dim=32, decoder_dim=64, hidden_size=32, intermediate_size=64,
                                 head_dim=8, num_attention_heads=4, num_key_value_heads=4, num_hidden_layers=2,
                                 vector_quantization_hidden_dimension=32)
    cfg["encoder_config"].update(codebook_dim=16, hidden_size=32, intermediate_size=64, head_dim=8,
                                 num_attention_heads=4, num_key_value_heads=4, num_filters=4, num_hidden_layers=2,
                                 vector_quantization_hidden_dimension=16, upsample_groups=32)
    return copy.deepcopy(cfg)


def resolve_model_dir(model: str) -> Path:
    path = Path(model).expanduser()
    if path.is_dir():
        if not (path / "config.json").exists() or not (path / "speech_tokenizer" / "config.json").exists():
            raise ModelLoadError(f"{path} is not a Qwen3-TTS checkpoint directory "
                                 "(config.json and speech_tokenizer/config.json expected)")
        return path
    if path.exists() or model.count("/") != 1 or model.startswith(("/", ".", "~")):
        raise ModelLoadError(f"model '{model}' is neither a checkpoint directory nor a hub repo id (owner/name); "
                             f"pass a downloaded checkpoint directory, or --dummy VARIANT for random weights")
    try:
        from huggingface_hub import snapshot_download
        return Path(snapshot_download(model))
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise ModelLoadError(
            f"model '{model}' is not a local directory and could not be fetched from the hub ({exc.__class__.__name__}"
            f": {first}). Download it (`hf download {model} --local-dir DIR`) and pass --model DIR, or use --dummy "
            f"VARIANT for random weights (variants: tiny, {', '.join(VARIANTS)}).") from None


def dummy_configs(variant: str) -> tuple[dict, dict, dict]:
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
