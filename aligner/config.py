"""Qwen3-ForcedAligner configuration: the published config.json as dataclasses; tiny variants."""
import copy
import json
from dataclasses import dataclass
from pathlib import Path

from engine.models.qwen3 import LMConfig

ASSETS = Path(__file__).parent / "assets"
PUBLISHED = ASSETS / "Qwen3-ForcedAligner-0.6B"      # vocab/merges link to engine's


@dataclass
class AudioEncoderConfig:
    num_mel_bins: int
    d_model: int
    layers: int
    heads: int
    ffn_dim: int
    downsample_hidden: int
    output_dim: int
    n_window: int              # a conv chunk is 2 * n_window mel frames (1 s)
    n_window_infer: int        # an attention window is n_window_infer mel frames (8 s)

    @classmethod
    def from_dict(cls, d: dict) -> "AudioEncoderConfig":
        return cls(d["num_mel_bins"], d["d_model"], d["encoder_layers"], d["encoder_attention_heads"],
                   d["encoder_ffn_dim"], d["downsample_hidden_size"], d["output_dim"], d["n_window"],
                   d["n_window_infer"])


@dataclass
class AlignerConfig:
    audio: AudioEncoderConfig
    text: LMConfig
    classes: int               # classify_num: the head's timestamp classes
    segment_ms: float          # timestamp_segment_time: one class step
    audio_token: int
    audio_start: int
    audio_end: int
    timestamp_token: int

    @classmethod
    def from_dict(cls, cfg: dict) -> "AlignerConfig":
        t = cfg["thinker_config"]
        if "forced_aligner" not in t.get("model_type", ""):
            raise ValueError(f"not a forced-aligner config (thinker model_type {t.get('model_type')!r}, "
                             "expected 'qwen3_forced_aligner')")
        return cls(AudioEncoderConfig.from_dict(t["audio_config"]), LMConfig.from_dict(t["text_config"]),
                   t["classify_num"], float(cfg["timestamp_segment_time"]), t["audio_token_id"],
                   t["audio_start_token_id"], t["audio_end_token_id"], cfg["timestamp_token_id"])

    @classmethod
    def load(cls, directory: str | Path) -> "AlignerConfig":
        return cls.from_dict(json.loads((Path(directory) / "config.json").read_text()))


def published_config() -> dict:
    return json.loads((PUBLISHED / "config.json").read_text())


def tiny_config() -> dict:
    cfg = copy.deepcopy(published_config())
    t = cfg["thinker_config"]
    t["audio_config"].update(d_model=32, encoder_layers=2, num_hidden_layers=2, encoder_attention_heads=4,
                             encoder_ffn_dim=64, downsample_hidden_size=8, output_dim=32)
    t["text_config"].update(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                            num_key_value_heads=2, head_dim=8,
                            rope_scaling={"interleaved": True, "mrope_interleaved": True, "mrope_section": [2, 1, 1],
                                          "rope_type": "default", "type": "default"})
    return cfg
