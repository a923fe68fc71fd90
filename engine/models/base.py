"""What the engine's core knows of a model: its audio format, KV layout, request layout and stages.
Every model runs the same stages: prefill -> first c0 id, then per frame predict -> decode -> talk."""
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
    body: int                   # rows that carry a reference transcript


@dataclass
class Prompt:
    prefix: Prefix
    prefix_rows: Callable[[], torch.Tensor] | None      # built only where its KV is not cached
    rows: torch.Tensor
    consumed: int               # feed ids already inside the prompt
    eos_consumed: bool

    @property
    def length(self) -> int:
        return self.prefix.length + self.rows.shape[0]


class Model(Protocol):
    name: str
    device: torch.device
    dtype: torch.dtype
    cfg: object                 # what requests may ask for (api/validate.py)
    tokenizer: object
    audio: AudioFormat
    kv_layout: KVLayout
    hidden_size: int
    eos: int                    # the codebook-0 id that ends a stream
    text_eos: int               # fed once after the text, then text_pad for ever
    text_pad: int
    text_prefix: str            # its first ids are the prompt's role (seq.role_ids)
    info: dict

    def voices(self, voices_dir: str | None): ...

    def make_voice(self, ref): ...

    # requests, on the engine thread
    def prepare(self, seq, voices) -> None: ...

    def prompt(self, seq) -> Prompt | None: ...                  # None while too little text has arrived

    def prompt_tokens(self, seq, text_ids: int) -> int: ...

    # stages: pure tensor functions the runner captures as CUDA graphs
    def allocate(self, slots: int) -> None: ...                  # the last slot is scratch (padding rows)

    def reset(self, slots: torch.Tensor, seqs: list) -> None: ...

    def prefill(self, rows, positions, kv) -> torch.Tensor: ...

    def first(self, slots, hidden, sampling, all_greedy: bool) -> torch.Tensor: ...

    def talk(self, slots, text_ids, positions, allow_eos, kv, sampling, all_greedy: bool) -> torch.Tensor: ...

    def predict(self, slots, sampling, all_greedy: bool) -> torch.Tensor: ...

    def decode(self, slots, codes) -> torch.Tensor: ...
