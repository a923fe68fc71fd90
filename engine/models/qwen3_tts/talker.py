"""The talker LM: emits codebook 0 per frame."""
import torch
import torch.nn.functional as F
from torch import nn

from engine.models.qwen3_tts.config import TTSConfig
from engine.models.qwen3 import DecoderStack, Rotary
from engine.models.qwen3_tts.predictor import CodePredictor


class TalkerBody(DecoderStack):
    def __init__(self, cfg: TTSConfig):
        super().__init__(cfg.talker)
        self.codec_embedding = nn.Embedding(cfg.talker.vocab_size, cfg.talker.hidden_size)
        self.text_embedding = nn.Embedding(cfg.text_vocab_size, cfg.text_hidden_size)


class TextProjection(nn.Module):
    def __init__(self, text_hidden: int, hidden: int):
        super().__init__()
        self.linear_fc1 = nn.Linear(text_hidden, text_hidden, bias=True)
        self.linear_fc2 = nn.Linear(text_hidden, hidden, bias=True)

    def forward(self, x):
        return self.linear_fc2(F.silu(self.linear_fc1(x)))


class Talker(nn.Module):
    def __init__(self, cfg: TTSConfig):
        super().__init__()
        self.model = TalkerBody(cfg)
        self.text_projection = TextProjection(cfg.text_hidden_size, cfg.talker.hidden_size)
        self.codec_head = nn.Linear(cfg.talker.hidden_size, cfg.talker.vocab_size, bias=False)
        self.code_predictor = CodePredictor(cfg)
        self.rotary = Rotary(cfg.talker.head_dim, cfg.talker.rope_theta)

    def embed_text(self, ids: torch.Tensor) -> torch.Tensor:
        return self.text_projection(self.model.text_embedding(ids))

    def embed_codec(self, ids: torch.Tensor) -> torch.Tensor:
        return self.model.codec_embedding(ids)

    def embed_frame(self, codes: torch.Tensor) -> torch.Tensor:
        tables = [self.model.codec_embedding] + list(self.code_predictor.model.codec_embedding)
        return torch.stack([t(codes[:, i]) for i, t in enumerate(tables)], dim=1).sum(1)

    def forward(self, x: torch.Tensor, positions: torch.Tensor, kv) -> torch.Tensor:
        cos, sin = self.rotary(positions, x.dtype)
        return self.model(x, cos, sin, kv)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.codec_head(hidden).float()
