"""Word timestamps from one forward: the argmax class at each `<timestamp>` token, times 80 ms."""
import contextlib
import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from engine.core.startup import phase
from engine.models.qwen3_tts.text_tokenizer import TextTokenizer
from engine.models.weights import ModelLoadError, default_device_dtype, load_checkpoint, seed_weights

from .audio_encoder import audio_tokens
from .config import PUBLISHED, AlignerConfig, published_config, tiny_config
from .features import HOP, SAMPLE_RATE, joined, log_mels, mel_shape, resampled_length
from .forward import Forward
from .front_end import DEFAULT as DEFAULT_FRONT_END
from .layout import largest_first
from .model import AlignerModel
from .text import Word, segment


def repair(values: list[float]) -> list[int]:
    """The reference's repair of non-monotone timestamps."""
    n = len(values)
    v = np.asarray(values, dtype=np.float64)
    if n < 2 or (v[1:] >= v[:-1]).all():                   # a trained model's usual answer
        return [int(x) for x in values]
    best, prev = np.ones(n, dtype=np.int64), np.full(n, -1)
    for i in range(1, n):
        candidates = np.where(v[:i] <= v[i], best[:i], 0)
        j = int(candidates.argmax())
        if candidates[j]:
            best[i], prev[i] = candidates[j] + 1, j
    kept, i = np.zeros(n, dtype=bool), int(best.argmax())
    while i >= 0:
        kept[i], i = True, prev[i]
    out, i = list(map(float, values)), 0
    while i < n:
        if kept[i]:
            i += 1
            continue
        j = i
        while j < n and not kept[j]:
            j += 1
        left = out[i - 1] if i > 0 else None                 # run neighbours are kept values
        right = out[j] if j < n else None
        for k in range(i, j):
            if left is None or right is None:
                out[k] = right if left is None else left
            elif j - i <= 2:
                out[k] = left if k - i + 1 <= j - k else right
            else:
                out[k] = left + (right - left) / (j - i + 1) * (k - i + 1)
        i = j
    return [int(x) for x in out]


@dataclass
class Launched:
    """A batch whose forward is queued: its job count, the jobs with units (in the forward's order), the forward."""
    jobs: int
    todo: list[int]
    forward: Forward | None


class Aligner:
    def __init__(self, model: AlignerModel, tokenizer: TextTokenizer, name: str, stream=None):
        self.model, self.tokenizer, self.name, self.stream = model, tokenizer, name, stream
        self.unit_ids = functools.lru_cache(maxsize=1 << 16)(tokenizer.encode)   # windows repeat their units
        self.cfg = model.cfg
        self.device = model.thinker.lm_head.weight.device
        self.slices = len(model.encoder) + len(model.text)         # a forward's turns at most

    @classmethod
    def load(cls, model: str | None = None, dummy: str | None = None, device=None, dtype=None,
             seed: int = 0, graphs: bool | None = None, front_end: str = DEFAULT_FRONT_END) -> "Aligner":
        """`dummy`: 'published' (the real config) or 'tiny'; `front_end`: how the audio encoder runs its convs
        (aligner/front_end.py)."""
        device, dtype = default_device_dtype(device, dtype)
        if (model is None) == (dummy is None):
            raise ValueError("give exactly one of model (a checkpoint directory or hub id) and dummy")
        if dummy is not None and dummy not in ("published", "tiny"):
            raise ModelLoadError(f"unknown dummy aligner '{dummy}'; choose published or tiny")
        with phase("aligner weights"):
            if dummy is not None:
                cfg = AlignerConfig.from_dict(published_config() if dummy == "published" else tiny_config())
                with torch.device(device):
                    net = AlignerModel(cfg)
                seed_weights(net, seed)
                path, name = PUBLISHED, f"dummy:{dummy}"
            else:
                path, name = resolve_aligner_dir(model), str(model)
                net = AlignerModel(AlignerConfig.load(path))
                load_checkpoint(net, path)
            net = net.to(device, dtype).eval()
            net.pack(front_end)
        with phase("aligner tokenizer"):
            tokenizer = TextTokenizer.load(path if (path / "vocab.json").exists() else PUBLISHED)
        # lowest priority: where a forward runs beside an engine step, the step's kernels keep the SMs first
        stream = torch.cuda.Stream(device, priority=0) if device.type == "cuda" else None
        if device.type == "cuda" if graphs is None else graphs:
            with phase("aligner graphs"):
                net.capture(stream)
        return cls(net, tokenizer, name, stream)

    def align(self, audio: np.ndarray, text: str, language: str, sample_rate: int = SAMPLE_RATE) -> list[Word]:
        units = segment(text, language)
        spans = self.align_units([(audio, [u.text for u in units])], sample_rate)[0]
        return [Word(u.text, s, e, u.start, u.end) for u, (s, e) in zip(units, spans)]

    def align_units(self, items: list[tuple[np.ndarray, list[str]]], sample_rate: int = SAMPLE_RATE,
                    turn=None) -> list[list[tuple[float, float]]]:
        """A batch of (audio, units) -> (start, end) s per unit: one forward, run in `turn`s of the device."""
        return self.finish(self.launch_units(items, sample_rate, turn))

    def launch_units(self, items: list[tuple[np.ndarray, list[str]]], sample_rate: int = SAMPLE_RATE,
                     turn=None) -> Launched:
        """align_units' forward, queued on the device; finish() waits for it and reads the spans."""
        todo = largest_first([i for i, (_, units) in enumerate(items) if units], [len(a) for a, _ in items])
        if not todo:
            return Launched(len(items), todo, None)
        audios = [np.asarray(items[i][0], np.float32).reshape(-1) for i in todo]
        if (short := min(resampled_length(len(a), sample_rate) for a in audios)) < HOP:
            raise ValueError(f"audio of {short} samples at 16 kHz is too short to align (at least {HOP})")
        frames, width = mel_shape([len(a) for a in audios], sample_rate)
        plan = self.model.plan(frames, width, [self._input_ids(audio_tokens(f), items[i][1])
                                               for i, f in zip(todo, frames)])
        staged = joined(audios, pin=self.stream is not None)    # host copies, before the turn
        mel = lambda: log_mels(audios, sample_rate, self.cfg.audio.num_mel_bins, self.device, staged)[0]
        forward = Forward(self.model, mel, plan)
        while forward.left:
            whole = contextlib.nullcontext((len(forward.left), None))
            with turn(forward.left) if turn is not None else whole as (count, now), self._on_stream():
                timed = self.stream is not None
                beside = [torch.cuda.Event(enable_timing=True) for _ in range(2)] if timed and \
                    not forward.prepared else []
                beside and beside[0].record()
                forward.prepare()       # once, before the wait for the step: beside its tail, on the aligner's stream
                beside and beside[1].record()
                marks = [torch.cuda.Event(enable_timing=True) for _ in range(2)] if timed else []
                if now is not None and now.after is not None:
                    self.stream.wait_event(now.after)
                marks and marks[0].record()
                forward.run(count)
                marks and marks[1].record()
                if now is not None:
                    now.end(*reversed(marks), beside=beside or None)
        return Launched(len(items), todo, forward)

    def finish(self, launched: Launched) -> list[list[tuple[float, float]]]:
        """The spans of a launched batch, once its forward's results are on the host (any thread may wait)."""
        out = [[] for _ in range(launched.jobs)]
        if launched.forward is None:
            return out
        for i, classes in zip(launched.todo, launched.forward.read()):
            ms = repair([c * self.cfg.segment_ms for c in classes])
            out[i] = [(round(ms[2 * k] / 1000.0, 3), round(ms[2 * k + 1] / 1000.0, 3)) for k in range(len(ms) // 2)]
        return out

    def _on_stream(self):
        return torch.cuda.stream(self.stream) if self.stream is not None else contextlib.nullcontext()

    def _input_ids(self, n_audio: int, units: list[str]) -> list[int]:
        return input_ids(self.cfg, self.unit_ids, n_audio, units)


def input_ids(cfg: AlignerConfig, unit_ids, n_audio: int, units: list[str]) -> list[int]:
    """The reference's sequence: the audio's placeholders, then each unit's tokens and two `<timestamp>`s."""
    ts = cfg.timestamp_token
    ids = [cfg.audio_start] + [cfg.audio_token] * n_audio + [cfg.audio_end]
    for unit in units:
        ids += unit_ids(unit) + [ts, ts]
    return ids


def resolve_aligner_dir(model: str) -> Path:
    path = Path(model).expanduser()
    if path.is_dir():
        if not (path / "config.json").exists():
            raise ModelLoadError(f"{path} is not a Qwen3-ForcedAligner checkpoint directory (config.json expected)")
        return path
    if path.exists() or model.count("/") != 1:
        raise ModelLoadError(f"aligner '{model}' is neither a checkpoint directory nor a hub repo id (owner/name), "
                             "e.g. Qwen/Qwen3-ForcedAligner-0.6B; or use a dummy aligner")
    try:
        from huggingface_hub import snapshot_download
        return Path(snapshot_download(model))
    except Exception as exc:
        raise ModelLoadError(f"aligner '{model}' is not a local directory and could not be fetched from the hub "
                             f"({exc.__class__.__name__}: {exc}); download it and pass its directory") from None
