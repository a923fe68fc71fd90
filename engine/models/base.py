"""What the engine's core knows of a model: its audio format, its KV layout, its request layout and its stages.

The scheduler drives every model through the same stages (VoxServe's idea): prefill a prompt -> first codebook-0 id,
then per frame predict (the frame's other codebooks) -> decode (PCM) -> talk (the next codebook-0 id)."""
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
    body: int                   # of them, rows that carry a reference transcript


@dataclass
class Prompt:
    prefix: Prefix
    prefix_rows: Callable[[], torch.Tensor] | None      # [prefix.length, H], built only where its KV is not cached
    rows: torch.Tensor          # [L, H] the stream's own rows, after the prefix
    consumed: int               # ids of the feed list already inside the prompt
    eos_consumed: bool          # the end-of-text id already inside the prompt

    @property
    def length(self) -> int:
        return self.prefix.length + self.rows.shape[0]


class Model(Protocol):
    name: str
    device: torch.device
    dtype: torch.dtype
    cfg: object                 # what requests may ask for: generation defaults, and what check_request reads
    tokenizer: object           # split_final_batch (core/text_intake.py), encode
    audio: AudioFormat
    kv_layout: KVLayout
    hidden_size: int
    eos: int                    # the codebook-0 id that ends a stream
    text_eos: int               # fed once after the text, then text_pad for ever
    text_pad: int
    text_prefix: str            # tokenized with the text: its first ids are the prompt's role (seq.role_ids)
    info: dict

    @staticmethod
    def check_request(cfg, voices, request) -> None: ...        # module-level: it travels to front ends by reference

    def voices(self, voices_dir: str | None): ...                # the registered voices (api/validate.py's `voices`)

    def make_voice(self, ref): ...

    # requests, on the engine thread
    def prepare(self, seq, voices) -> None: ...                  # conditioning, prefix and feed of a new stream

    def prompt(self, seq) -> Prompt | None: ...                  # None while too little text has arrived

    def prompt_tokens(self, seq, text_ids: int) -> int: ...      # admission's estimate of its prompt

    # per-slot device state and the stages, pure tensor functions the runner captures as CUDA graphs
    def allocate(self, slots: int) -> None: ...                  # the last slot is scratch (padding rows)

    def reset(self, slots: torch.Tensor, seqs: list) -> None: ...

    def prefill(self, rows, positions, kv) -> torch.Tensor: ...                    # hidden states [N, H]

    def first(self, slots, hidden, sampling, all_greedy: bool) -> torch.Tensor: ...    # codebook-0 ids [B]

    def talk(self, slots, text_ids, positions, allow_eos, kv, sampling, all_greedy: bool) -> torch.Tensor: ...

    def predict(self, slots, sampling, all_greedy: bool) -> torch.Tensor: ...      # codes [B, num_codebooks]

    def decode(self, slots, codes) -> torch.Tensor: ...                            # float32 PCM [B, samples]
