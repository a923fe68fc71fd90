"""Qwen3-ForcedAligner-0.6B: audio encoder + Qwen3 text model + a 5000-class timestamp head.

Module names match the published checkpoint (`thinker.audio_tower.*`, `thinker.model.*`, `thinker.lm_head.*`),
so its safetensors load with no conversion. One non-autoregressive forward per batch of (audio, ids) pairs."""
import torch
from torch import nn

from engine.config import LMConfig
from engine.layers import DecoderStack, Rotary

from .audio_encoder import AudioEncoder
from .config import AlignerConfig
from .packed import CausalKV, Packed


class TextModel(DecoderStack):
    def __init__(self, cfg: LMConfig):
        super().__init__(cfg)
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)


class Thinker(nn.Module):
    def __init__(self, cfg: AlignerConfig):
        super().__init__()
        self.audio_tower = AudioEncoder(cfg.audio)
        self.model = TextModel(cfg.text)
        self.lm_head = nn.Linear(cfg.text.hidden_size, cfg.classes, bias=False)


class AlignerModel(nn.Module):
    def __init__(self, cfg: AlignerConfig):
        super().__init__()
        self.cfg = cfg
        self.thinker = Thinker(cfg)
        self.rotary = Rotary(cfg.text.head_dim, cfg.text.rope_theta)

    @torch.inference_mode()
    def classify(self, mels: list[torch.Tensor], ids: list[list[int]]) -> list[torch.Tensor]:
        """Per sequence: its log-mel [mels, frames] and input ids (the audio placeholder expanded to the audio's
        token count) -> the argmax class at each `<timestamp>` position (a device tensor)."""
        t, dtype = self.thinker, self.thinker.lm_head.weight.dtype
        device = t.lm_head.weight.device
        flat = [i for seq in ids for i in seq]
        audio_rows = [r for r, i in enumerate(flat) if i == self.cfg.audio_token]
        stamp_rows = [r for r, i in enumerate(flat) if i == self.cfg.timestamp_token]
        x = t.model.embed_tokens(torch.tensor(flat, device=device))
        x[torch.tensor(audio_rows, device=device)] = torch.cat(t.audio_tower([m.to(dtype) for m in mels])).to(x.dtype)
        positions = torch.cat([torch.arange(len(seq)) for seq in ids]).to(device)
        cos, sin = self.rotary(positions, x.dtype)
        h = t.model(x, cos, sin, CausalKV(Packed([len(seq) for seq in ids], device)))
        classes = t.lm_head(h[torch.tensor(stamp_rows, device=device)]).argmax(-1)
        return list(classes.split([seq.count(self.cfg.timestamp_token) for seq in ids]))
