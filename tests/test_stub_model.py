"""The model interface (engine/models/base.py) is all the scheduler, runner and engine loop know: a stub model with
one codebook and a decoder that repeats its code runs through them unchanged and streams audio out."""
from types import SimpleNamespace

import numpy as np
import torch

from engine import Engine, SynthesisRequest
from engine.models.base import AudioFormat, KVLayout, Prefix, Prompt

EOS, TEXT_EOS, TEXT_PAD, HIDDEN = 99, 1, 0, 4


class StubTokenizer:
    def encode(self, text: str) -> list[int]:
        return [2 + ord(c) % 50 for c in text]

    def split_control(self, prefix: str):
        return [], prefix

    def split_final_batch(self, texts, closed):
        return [(self.encode(t), len(t), len(t)) for t in texts]     # one id a character: every id is final


class NoVoices(dict):
    def names(self) -> list[str]:
        return list(self)


class StubModel:
    """A frame's one code is the text id fed at its step; EOS comes once the text is spoken; PCM repeats the code."""
    name, device, dtype = "stub", torch.device("cpu"), torch.float32
    cfg = SimpleNamespace(generation={})
    tokenizer = StubTokenizer()
    audio = AudioFormat(num_codebooks=1, samples_per_frame=4, sample_rate=50)
    kv_layout = KVLayout(num_layers=1, num_kv_heads=1, head_dim=HIDDEN)
    hidden_size, eos, text_eos, text_pad, text_prefix = HIDDEN, EOS, TEXT_EOS, TEXT_PAD, ""
    info = dict(model="stub", sample_rate=50)
    graph_variants = ((None, None),)
    voice_modules = ()

    @staticmethod
    def check_request(cfg, voices, request) -> None:
        pass

    def voices(self, voices_dir, capacity):
        return NoVoices()

    def prepare(self, seq, voices) -> None:
        seq.prefix = Prefix((), 0, 0)

    def prompt(self, seq):
        if not seq.text.feed:
            return None
        rows = torch.zeros(1, HIDDEN)
        rows[0, 0] = seq.text.feed[0]
        return Prompt(seq.prefix, None, rows, consumed=1, eos_consumed=False)

    def prompt_tokens(self, seq, text_ids: int) -> int:
        return 1

    def variant(self, stage, seqs):
        return None

    def allocate(self, slots: int) -> None:
        self.c0 = torch.zeros(slots, dtype=torch.int64)

    def reset(self, slots, seqs) -> None:
        self.c0[slots] = 0

    def reset_uses_scratch(self, seqs) -> bool:
        return False

    def prefill(self, rows, positions, kv):
        return rows

    def first(self, slots, hidden, variant):
        self.c0[slots] = hidden[:, 0].long()
        return self.c0[slots]

    def talk(self, slots, text_ids, positions, allow_eos, kv, variant):
        self.c0[slots] = torch.where(allow_eos & (text_ids == TEXT_PAD), EOS, text_ids)
        return self.c0[slots]

    def predict(self, slots, variant):
        return self.c0[slots].masked_fill(self.c0[slots] == EOS, 0)[:, None]

    def decode(self, slots, codes):
        return codes.float().repeat(1, self.audio.samples_per_frame) / 100


def test_a_stub_model_streams_through_the_unchanged_scheduler_runner_and_engine_loop():
    engine = Engine(StubModel(), max_active=4, kv_tokens_per_stream=64).start()
    try:
        texts = ["abc", "hello"]
        handles = [engine.submit(SynthesisRequest(text=t, chunk_frames=(2,))) for t in texts]
        for text, handle in zip(texts, handles):
            chunks = list(handle.iter_blocking())
            codes = np.concatenate([c.codes for c in chunks])
            want = StubTokenizer().encode(text) + [TEXT_EOS]       # a frame per text id, then tts_eos's
            np.testing.assert_array_equal(codes, np.array(want)[:, None])
            audio = np.concatenate([c.pcm for c in chunks])
            np.testing.assert_allclose(audio, np.repeat(np.array(want, np.float32) / 100, 4))
            assert chunks[-1].final and chunks[-1].finish_reason == "eos"
            assert [c.frame_offset for c in chunks] == list(np.cumsum([0] + [len(c.codes) for c in chunks[:-1]]))
            assert [c.sample_offset for c in chunks] == [4 * c.frame_offset for c in chunks]
    finally:
        engine.shutdown()


def test_a_stream_starts_beside_the_decode_in_flight_unless_its_slot_is_decoding_or_its_reset_uses_the_scratch():
    model = StubModel()
    runner, joins = Engine(model, max_active=4, kv_tokens_per_stream=64).runner, []

    def join():
        joins.append(set(runner.decoding))
        runner.decoding = set()

    runner.join_decode = join
    runner.decoding = {0, 1}                         # the last decode's streams, still on the side stream
    runner.start([SimpleNamespace(slot=2)])
    assert joins == []
    runner.start([SimpleNamespace(slot=3), SimpleNamespace(slot=1)])     # slot 1's previous stream is decoding
    assert joins == [{0, 1}] and runner.decoding == set()
    runner.decoding = {0}
    model.reset_uses_scratch = lambda seqs: True     # e.g. a clone voice's first stream primes the scratch slot
    runner.start([SimpleNamespace(slot=2)])
    assert joins == [{0, 1}, {0}]
