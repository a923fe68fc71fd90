"""The code predictor: codebooks 1-15 of a frame; a batch runs in lockstep over a dense 16-position cache."""
import torch
from torch import nn

from engine.models.qwen3_tts.config import TTSConfig
from engine.models.qwen3 import DecoderStack, Rotary
from engine.kernels.registry import ops
from engine.models.sampling import sample


class PredictorBody(DecoderStack):
    def __init__(self, cfg: TTSConfig):
        super().__init__(cfg.predictor)
        groups = cfg.num_code_groups - 1
        self.codec_embedding = nn.ModuleList(
            nn.Embedding(cfg.predictor.vocab_size, cfg.talker.hidden_size) for _ in range(groups))


class DenseKV:

    def __init__(self, num_layers: int, batch: int, kv_heads: int, head_dim: int, positions: int, dtype, device):
        shape = (num_layers, batch, positions, kv_heads, head_dim)
        self.k = torch.empty(shape, dtype=dtype, device=device)
        self.v = torch.empty(shape, dtype=dtype, device=device)
        self.start = self.len = 0

    def attend(self, layer, q, k, v, scale):
        return ops.dense_attention(q, k, v, self.k[layer], self.v[layer], self.start, scale)


class CodePredictor(nn.Module):
    def __init__(self, cfg: TTSConfig):
        super().__init__()
        self.cfg = cfg.predictor
        self.groups = cfg.num_code_groups - 1
        self.model = PredictorBody(cfg)
        self.lm_head = nn.ModuleList(nn.Linear(cfg.predictor.hidden_size, cfg.predictor.vocab_size, bias=False)
                                     for _ in range(self.groups))
        same = cfg.predictor.hidden_size == cfg.talker.hidden_size
        self.small_to_mtp_projection = nn.Identity() if same else nn.Linear(cfg.talker.hidden_size,
                                                                            cfg.predictor.hidden_size, bias=True)
        self.rotary = Rotary(cfg.predictor.head_dim, cfg.predictor.rope_theta, max_positions=cfg.num_code_groups)

    def _run(self, x: torch.Tensor, kv: DenseKV) -> torch.Tensor:
        b, n, _ = x.shape
        kv.start, kv.len = kv.len, kv.len + n
        cos, sin = (t[kv.start:kv.len] for t in self.rotary.table(x.dtype, x.device))
        if n > 1:
            cos, sin = cos.repeat(b, 1), sin.repeat(b, 1)
        h = self.model(self.small_to_mtp_projection(x).reshape(b * n, -1), cos, sin, kv)
        return h.view(b, n, -1)[:, -1]

    def forward(self, hidden: torch.Tensor, c0_embed: torch.Tensor, sampling) -> torch.Tensor:
        b = hidden.shape[0]
        kv = DenseKV(self.cfg.num_layers, b, self.cfg.num_kv_heads, self.cfg.head_dim, self.groups + 1,
                     hidden.dtype, hidden.device)
        h = self._run(torch.stack((hidden, c0_embed), dim=1), kv)
        codes = []
        for j in range(self.groups):
            code = sample(self.lm_head[j](h), sampling, codebook=j + 1)
            codes.append(code)
            if j + 1 < self.groups:
                h = self._run(self.model.codec_embedding[j](code)[:, None], kv)
        return torch.stack(codes, dim=1)
