"""Random weights of the real architecture: published configs (or tiny ones) and a seeded init.

`tiny` configs keep every token id and the layout of the published ones and shrink only the widths,
so the CPU tests and `--dummy tiny` exercise the same code as the real models."""
import copy
import json
import math

import torch

from .config import ASSETS


def tiny_tts_config(variant: str = "1.7B-CustomVoice") -> dict:
    """The published config of `variant` with every dimension shrunk; token ids and layout untouched."""
    cfg = json.loads((ASSETS / "models" / variant / "config.json").read_text())
    cfg.pop("auto_map", None)
    t = cfg["talker_config"]
    small = cfg["tts_model_size"] == "0b6"      # 0.6B: predictor width == talker width (Identity projection)
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


@torch.no_grad()
def seed_weights(module: torch.nn.Module, seed: int) -> None:
    """Draw every float parameter and buffer from `seed`, scaled so activations stay O(1)."""
    g = None
    # the checkpoint's tensors only (parameters and persistent buffers), in name order
    for name, p in sorted(module.state_dict(keep_vars=True).items()):
        if not p.is_floating_point():
            continue
        leaf = name.rsplit(".", 1)[-1]
        if g is None or g.device != p.device:
            g = torch.Generator(p.device).manual_seed(seed)
        r = torch.randn(p.shape, generator=g, dtype=torch.float32, device=p.device)
        if leaf == "cluster_usage":
            v = 0.5 + torch.rand(p.shape, generator=g, device=p.device)
        elif leaf in ("alpha", "beta"):                    # SnakeBeta works on log scale
            v = 0.3 * r
        elif leaf == "scale":                              # LayerScale
            v = 0.5 + 0.1 * r
        elif leaf == "gamma":                              # ConvNeXt residual scale
            v = 0.5 + 0.1 * r
        elif "norm" in name and leaf == "weight" or leaf == "weight" and p.dim() == 1:
            v = 1.0 + 0.1 * r
        elif leaf == "bias" or p.dim() == 1:
            v = 0.05 * r
        elif leaf == "embedding_sum" or "embedding" in name:
            v = r
        else:                                              # linear/conv weights: unit gain over the fan-in
            fan_in = p[0].numel() if p.dim() > 1 else 1
            v = r / math.sqrt(fan_in)
            if p.dim() == 3 and p.shape[0] == 1:           # waveform output conv: keep audio inside the clamp
                v = v * 0.015
        p.copy_(v.to(p.dtype))
