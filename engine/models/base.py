"""The model interface the core drives: prefill -> a frame's first code (or one talk row), then per frame predict ->
decode -> talk."""
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import torch


@dataclass(frozen=True)
class AudioFormat:
    num_codebooks: int
    samples_per_frame: int
    sample_rate: int

    @property
    def frame_s(self) -> float:
        return self.samples_per_frame / self.sample_rate


@dataclass(frozen=True)
class KVLayout:
    num_layers: int
    num_kv_heads: int
    head_dim: int


@dataclass(frozen=True)
class Prefix:
    """The rows a prompt starts with that every stream of its key shares, with their KV."""
    key: tuple
    length: int
    body: int


@dataclass
class Prompt:
    prefix: Prefix
    prefix_rows: Callable[[], torch.Tensor] | None      # built only where its KV is not cached
    rows: torch.Tensor
    consumed: int
    eos_consumed: bool
    # a prompt that is one talker step after its prefix (a text id over the frame row reset() seeds): it rides the
    # step's talk instead of a prefill pass of its own
    talk_id: int | None = None

    @property
    def length(self) -> int:
        return self.prefix.length + self.rows.shape[0]


class Model(Protocol):
    name: str
    device: torch.device
    dtype: torch.dtype
    cfg: object
    request_rules: object       # what check_request and the Validator read of cfg, as plain data for front ends
    tokenizer: object           # encode, split_control (the prefix's control ids), split_final_batch
    audio: AudioFormat
    kv_layout: KVLayout
    hidden_size: int
    eos: int
    text_eos: int               # fed once after the text, then text_pad for ever
    text_pad: int
    text_prefix: str
    info: dict

    @staticmethod
    def check_request(cfg, voices, request) -> None: ...        # module-level: it travels to front ends by reference

    def voices(self, voices_dir: str | None, capacity: int): ...

    def make_voice(self, ref): ...

    voice_modules: tuple                    # what make_voice runs: paced when it runs beside streams
    projection_weights: list                # its decoder layers' projections: fp8 under --weights-dtype fp8

    def prepare(self, seq, voices) -> None: ...

    def prompt(self, seq) -> Prompt | None: ...

    def prompt_tokens(self, seq, text_ids: int) -> int: ...

    # stages: pure tensor functions the runner captures as CUDA graphs, one per bucket and variant
    graph_variants: tuple                   # (variant, the most rows its graphs serve: None for every bucket)

    def variant(self, stage: str, seqs) -> object: ...       # which graph of the stage ("first", "talk", "predict")

    def allocate(self, slots: int) -> None: ...

    def reset(self, slots: torch.Tensor, seqs: list) -> None: ...

    def reset_uses_scratch(self, seqs) -> bool: ...            # reset() runs stages on the scratch slot, which a
                                                                # decode beside it pads with

    def prefill(self, rows, positions, kv) -> torch.Tensor: ...

    def first(self, slots, hidden, variant) -> torch.Tensor: ...

    def talk(self, slots, text_ids, positions, allow_eos, kv, variant) -> torch.Tensor: ...

    def predict(self, slots, variant) -> torch.Tensor: ...

    def decode(self, slots, codes) -> torch.Tensor: ...
