"""Qwen3-ForcedAligner-0.6B: audio encoder + Qwen3 text model + timestamp head; names match the checkpoint."""
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

from engine.models.qwen3 import LMConfig
from engine.models.qwen3 import DecoderStack, Rotary
from engine.core.transfer import upload

from .audio_encoder import CHUNK, SLOTS, TOKENS, AudioEncoder
from .config import AlignerConfig
from .forward import Forward
from .front_end import DEFAULT as DEFAULT_FRONT_END
from .graphs import ShapeGraphs
from . import layout
from .layout import Layout, captured
from .packed import PackedKV


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


def cuts(layers: int, parts: int) -> list[slice]:
    parts = min(parts, layers)
    edges = [round(layers * i / parts) for i in range(parts + 1)]
    return [slice(a, b) for a, b in zip(edges, edges[1:])]


class AlignerModel(nn.Module):
    ENCODER_SLICES, TEXT_SLICES = 2, 4

    def __init__(self, cfg: AlignerConfig):
        super().__init__()
        self.cfg = cfg
        self.thinker = Thinker(cfg)
        self.rotary = Rotary(cfg.text.head_dim, cfg.text.rope_theta)
        self.encoder_layers = cuts(cfg.audio.layers, self.ENCODER_SLICES)
        self.text_layers = cuts(cfg.text.num_layers, self.TEXT_SLICES)
        self.encoder = [ShapeGraphs(partial(self._encode, s)) for s in self.encoder_layers]
        self.text = [ShapeGraphs(partial(self._decode, s)) for s in self.text_layers]

    def pack(self, front_end: str = DEFAULT_FRONT_END) -> None:
        self.thinker.audio_tower.pack(front_end)
        self.thinker.model.pack()

    def _encode(self, layers: slice, x, windows, conv_frames=None) -> torch.Tensor:
        return self.thinker.audio_tower(x, windows, conv_frames, layers)

    def _decode(self, layers: slice, x, positions, sequences, audio_rows=None, is_audio=None, audio=None):
        t = self.thinker.model
        if audio is not None:
            ids = x
            x = t.embed_tokens(ids.flatten())
            x = torch.where(is_audio.flatten()[:, None], audio.flatten(0, 1)[audio_rows.flatten()].to(x.dtype), x)
        cos, sin = self.rotary(positions.flatten(), x.dtype)
        kv = PackedKV(sequences, x.dtype)
        for layer in t.layers[layers]:
            x = layer(x, cos, sin, kv)
        if layers.stop < len(t.layers):
            return x
        return self.thinker.lm_head(t.norm(x)).argmax(-1).view(positions.shape)

    @torch.inference_mode()
    def capture(self, stream=None) -> None:
        """On a stream of their own: their cuBLAS workspace is not the engine graphs'."""
        pool, stream = torch.cuda.graph_pool_handle(), stream or torch.cuda.Stream()
        for stage in self.encoder + self.text:
            stage.pool, stage.stream = pool, stream
        device, dtype = self.thinker.lm_head.weight.device, self.thinker.lm_head.weight.dtype
        longs = lambda *shape, fill=0: torch.full(shape, fill, dtype=torch.int64, device=device)
        for e in layout.ROWS:
            x = torch.zeros(e, SLOTS, self.cfg.audio.num_mel_bins, CHUNK, dtype=dtype, device=device)
            windows, extra = longs(e, TOKENS, fill=-1), [longs(e, SLOTS)]
            for stage in self.encoder:
                x, extra = stage.capture(e, x, windows, *extra), []
        audio = torch.zeros(layout.ROWS[-1], TOKENS, self.cfg.audio.output_dim, dtype=dtype, device=device)
        for w in layout.WIDTHS:
            for r in (r for r in layout.ROWS if captured(r, w)):
                x, positions, sequences = longs(r, w), longs(r, w), longs(r, w, fill=-1)
                extra = [longs(r, w), longs(r, w).bool(), audio]
                for stage in self.text:
                    x, extra = stage.capture((r, w), x, positions, sequences, *extra), []
        torch.cuda.synchronize()

    def classify(self, mel: torch.Tensor, frames: list[int], ids: list[list[int]]) -> list[list[int]]:
        forward = Forward(self, lambda: mel, self.plan(frames, mel.shape[-1], ids))
        forward.run(len(forward.weights))
        return forward.read()

    def plan(self, frames: list[int], width: int, ids: list[list[int]]) -> list[tuple[int, int, Layout]]:
        return layout.plan(frames, width, ids, self.cfg.audio_token, self.cfg.timestamp_token)

    def inputs(self, lay: Layout, mel: torch.Tensor) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        device, dtype = self.thinker.lm_head.weight.device, self.thinker.lm_head.weight.dtype
        t = lambda a: upload(a, device=device)
        joined = F.pad(mel.transpose(0, 1).flatten(1), (0, 1))            # column -1: the zero frame of empty slots
        chunks = joined[:, t(lay.mel_frames)].permute(1, 2, 0, 3).to(dtype)
        return [chunks, t(lay.conv_frames), t(lay.windows)], \
            [t(a) for a in (lay.ids, lay.positions, lay.sequences, lay.audio_rows, lay.is_audio)]
