"""A real model (tokenizer, prompts, sampling settings) with its device work taken out: each stage returns
right-shaped tensors at once, so what a step costs is the host's own work. EOS comes at about 0.8 frames a character
(3 frames a text id), the real model's pace."""
import torch

from engine.models.base import AudioFormat, KVLayout

FRAMES_PER_ID = 3
FULL_AUDIO = AudioFormat(num_codebooks=16, samples_per_frame=1920, sample_rate=24000)   # the 12.5 Hz codec's


def hollow(model, audio: AudioFormat = FULL_AUDIO):
    """`model` with no-op stages; its KV cache one value a token (nothing reads it)."""
    model.audio, model.kv_layout = audio, KVLayout(num_layers=1, num_kv_heads=1, head_dim=1)

    def allocate(slots: int) -> None:
        model.codes = torch.zeros(slots, audio.num_codebooks, dtype=torch.int64)
        model.pcm = torch.zeros(slots, audio.samples_per_frame)
        model.text_end = torch.zeros(slots, dtype=torch.int64)     # a stream's position at its text's end

    def reset(slots, seqs) -> None:
        model.text_end[slots] = 1 << 40

    def talk(slots, text_ids, positions, allow_eos, kv, variant):
        model.text_end[slots] = torch.where(text_ids == model.text_eos, positions, model.text_end[slots])
        spoken = allow_eos & (text_ids == model.text_pad) & (positions >= FRAMES_PER_ID * model.text_end[slots])
        return torch.where(spoken, model.eos, 0)

    model.allocate, model.reset, model.reset_uses_scratch = allocate, reset, lambda seqs: False
    model.prefill = lambda rows, positions, kv: rows
    model.first = lambda slots, hidden, variant: torch.zeros(len(slots), dtype=torch.int64)
    model.talk, model.predict = talk, lambda slots, variant: model.codes[:len(slots)]
    model.decode = lambda slots, codes: model.pcm[:len(slots)]
    return model
