"""The loaded model: configs, talker, speaker encoder, codec and tokenizer on one device."""
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from engine.api.request import VoiceRef
from engine.api.voice_input import resample
from engine.core.memory import check_weights_fit
from engine.core.startup import phase
from engine.models.base import AudioFormat, KVLayout
from engine.models.qwen3 import DecoderLayer
from engine.models.qwen3_tts import SAMPLE_RATE, SAMPLES_PER_FRAME
from engine.models.qwen3_tts.checks import RequestRules, check_request
from engine.models.qwen3_tts.checkpoint import dummy_configs, resolve_model_dir
from engine.models.qwen3_tts.codec import Codec
from engine.models.qwen3_tts.config import TTSConfig
from engine.models.qwen3_tts.prompt import PromptBuilder, Voice
from engine.models.qwen3_tts.requests import RequestLayout
from engine.models.qwen3_tts.speaker_encoder import SpeakerEncoder
from engine.models.qwen3_tts.stages import TalkerStages
from engine.models.qwen3_tts.talker import Talker
from engine.models.qwen3_tts.text_tokenizer import TextTokenizer
from engine.models.qwen3_tts.voice_store import VoiceStore
from engine.models.qwen3_tts.voices import VoiceCache
from engine.models.weights import default_device_dtype, load_checkpoint, seed_weights, without_init


class TTSModel(nn.Module):

    def __init__(self, cfg: TTSConfig):
        super().__init__()
        self.talker = Talker(cfg)
        self.speaker_encoder = SpeakerEncoder(cfg.speaker_encoder) if cfg.speaker_encoder else None


@dataclass(eq=False)
class LoadedModel(TalkerStages, RequestLayout):
    cfg: TTSConfig
    tts: TTSModel
    codec: Codec
    tokenizer: TextTokenizer
    device: torch.device
    dtype: torch.dtype
    name: str
    check_request = staticmethod(check_request)

    def __post_init__(self):
        c, t = self.cfg, self.cfg.talker
        self.audio = AudioFormat(c.num_code_groups, SAMPLES_PER_FRAME, SAMPLE_RATE)
        self.kv_layout = KVLayout(t.num_layers, t.num_kv_heads, t.head_dim)
        self.hidden_size, self.eos = t.hidden_size, c.codec_ids["eos"]
        self.text_eos, self.text_pad = c.text_ids["tts_eos"], c.text_ids["tts_pad"]
        self.builder = PromptBuilder(c, self.tts.talker)
        self.role_ids = self.tokenizer.encode_prompt(self.text_prefix)
        self.request_rules = RequestRules.of(c)

    @property
    def projection_weights(self) -> list:
        return [w for layer in self.tts.modules() if isinstance(layer, DecoderLayer) for w in layer.projections()]

    def voices(self, voices_dir: str | None, capacity: int) -> VoiceCache:
        store = VoiceStore.for_model(voices_dir, self.name, capacity) if voices_dir else None
        return VoiceCache(self, capacity, store)

    @property
    def info(self) -> dict:
        c = self.cfg
        return dict(model=self.name, model_type=c.model_type, model_size=c.model_size, speakers=list(c.speakers),
                    languages=c.public_languages, takes_instruct=c.takes_instruct, sample_rate=SAMPLE_RATE,
                    samples_per_frame=SAMPLES_PER_FRAME, device=self.device.type)

    @property
    def voice_modules(self) -> tuple:
        return self.tts.speaker_encoder, self.codec.encoder

    @torch.inference_mode()
    @torch.backends.cudnn.flags(enabled=True, benchmark=False)   # each clip a new length: no per-length search
    def make_voice(self, ref: VoiceRef) -> Voice:
        # a copy of its own: audio over IPC arrives read-only, and torch.from_numpy warns of that
        audio = resample(np.array(ref.audio, dtype=np.float32).reshape(-1), ref.sample_rate, SAMPLE_RATE)
        xvector = self.tts.speaker_encoder.embed(torch.from_numpy(audio))
        codes, ids = None, None
        if not ref.x_vector_only:
            codes = self.codec.encoder.encode(torch.from_numpy(audio).to(self.device))
            ids = self.tokenizer.encode_prompt("<|im_start|>assistant\n", ref.text, "<|im_end|>\n")[3:-2]
        if self.device.type == "cuda":
            torch.cuda.current_stream().synchronize()    # made on a side stream: done before the engine's reads it
        return Voice(xvector=xvector, ref_codes=codes, ref_text_ids=ids)


def parameters(cfg: TTSConfig) -> int:
    with torch.device("meta"), without_init():
        return sum(p.numel() for module in (TTSModel(cfg), Codec(cfg.codec)) for p in module.parameters())


def load_model(model: str | None = None, dummy: str | None = None, device=None, dtype=None,
               seed: int = 0) -> LoadedModel:
    device, dtype = default_device_dtype(device, dtype)
    if (model is None) == (dummy is None):
        raise ValueError("give exactly one of model (a checkpoint directory or hub id) and dummy (a variant)")
    with phase("weights"):
        if dummy is not None:
            cfg = TTSConfig.from_dicts(*dummy_configs(dummy))
            check_weights_fit(parameters(cfg), device)
            with torch.device(device), without_init():
                tts, codec = TTSModel(cfg), Codec(cfg.codec)
            seed_weights(tts, seed)
            seed_weights(codec, seed + 1)
            name = f"dummy:{dummy}"
        else:
            path = resolve_model_dir(model)
            cfg = TTSConfig.load(path)
            check_weights_fit(parameters(cfg), torch.device("cpu"))         # built on the CPU, then moved
            with without_init():
                tts, codec = TTSModel(cfg), Codec(cfg.codec)
            load_checkpoint(tts, path)
            load_checkpoint(codec, path / "speech_tokenizer")
            name = str(model)
        tts = tts.to(device, dtype).eval()
        tts.talker.model.pack()
        tts.talker.code_predictor.model.pack()
        codec = codec.to(device, dtype).eval()
        codec.encoder.float()           # reference codes are computed once per voice: keep them exact
        codec.decoder.quantizer.refresh()
        codec.decoder.pack()
    with phase("tokenizer"):
        tokenizer = TextTokenizer.load(path if dummy is None and (path / "vocab.json").exists() else None)
    return LoadedModel(cfg, tts, codec, tokenizer, device, dtype, name)
