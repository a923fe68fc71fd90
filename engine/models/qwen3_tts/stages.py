"""Qwen3-TTS's stages on slot-indexed device state."""
import torch

from engine.core.transfer import upload
from engine.kernels.registry import ops
from engine.models.qwen3_tts.slot_sampling import SlotSampling
from engine.models.sampling import FAULT, guard, sample

CONTROL_IDS = 1024              # control tokens, never a frame's code
GREEDY_ROWS = 64


class TalkerStages:
    # argmax alone where no row samples, in batches up to GREEDY_ROWS: past them the sampling graph (its greedy rows
    # take the same argmax) serves, as start-up captures only the graphs a load of mostly sampling streams replays
    graph_variants = ((False, None), (True, GREEDY_ROWS))

    def variant(self, stage: str, seqs) -> bool:
        return len(seqs) <= GREEDY_ROWS and SlotSampling.all_greedy(seqs, sub=stage == "predict")

    def allocate(self, slots: int) -> None:
        tcfg = self.cfg.talker
        z = lambda *shape, dt=self.dtype: torch.zeros(*shape, dtype=dt, device=self.device)
        self.scratch = slots - 1
        self.sampling = SlotSampling(slots, self.device)
        self.hidden, self.frame_embed = z(slots, tcfg.hidden_size), z(slots, tcfg.hidden_size)
        self.c0, self.num_c0, self.frames = z(slots, dt=torch.int64), z(slots, dt=torch.int64), z(slots, dt=torch.int64)
        self.seen = z(slots, tcfg.vocab_size, dt=torch.bool)
        self.true = torch.ones((), dtype=torch.bool, device=self.device)
        self.suppress = z(tcfg.vocab_size, dt=torch.bool)
        self.suppress[tcfg.vocab_size - CONTROL_IDS:] = True
        self.suppress[self.eos] = False
        self.codec.decoder.allocate(slots)

    def reset(self, slots: torch.Tensor, seqs: list) -> None:
        self.sampling.write(slots, seqs)
        self.seen[slots] = False
        self.num_c0[slots] = 0
        self.frames[slots] = 0
        self.frame_embed[slots] = self.builder.talk_frame()
        self.codec.decoder.reset(slots)
        clones = [s for s in seqs if s.conditioning.voice.ref_codes is not None]
        if clones:
            self._load_primed(clones)

    def reset_uses_scratch(self, seqs) -> bool:
        """A clone voice's first stream primes its codec state in the scratch slot."""
        return any(s.conditioning.voice.ref_codes is not None and s.conditioning.voice.codec_state is None
                   for s in seqs)

    def _load_primed(self, seqs) -> None:
        """Primed once per voice in the scratch slot, then copied into the new streams' slots."""
        voices = list({id(s.conditioning.voice): s.conditioning.voice for s in seqs}.values())
        decoder = self.codec.decoder
        for v in voices:
            if v.codec_state is None:
                v.codec_state = decoder.primed_state(upload(v.ref_codes, device=self.device),
                                                     upload([self.scratch], device=self.device))
        which = upload([voices.index(s.conditioning.voice) for s in seqs], device=self.device)
        decoder.load(upload([s.slot for s in seqs], device=self.device),
                     [torch.cat(rows)[which] for rows in zip(*(v.codec_state for v in voices))])

    def _sample_c0(self, slots, hidden, allow_eos, all_greedy: bool):
        talker = self.tts.talker
        penalty = self.sampling.params["penalty"][slots]
        logits = ops.process_talker_logits(talker.logits(hidden), self.seen[slots], penalty, allow_eos, self.suppress,
                                           self.eos)
        c0 = sample(logits, self.sampling.batch(slots, "", self.num_c0[slots], all_greedy), codebook=0)
        self.seen.index_put_((slots, c0), self.true)
        c0 = guard(logits, c0)
        self.c0[slots] = c0
        self.hidden[slots] = hidden
        self.num_c0[slots] += 1
        return c0

    def prefill(self, rows, positions, kv):
        return self.tts.talker(rows, positions, kv)

    def first(self, slots, hidden, all_greedy: bool):
        return self._sample_c0(slots, hidden, torch.zeros_like(slots, dtype=torch.bool), all_greedy)

    def talk(self, slots, text_ids, positions, allow_eos, kv, all_greedy: bool):
        talker = self.tts.talker
        x = self.frame_embed[slots] + talker.embed_text(text_ids)
        return self._sample_c0(slots, talker(x, positions, kv), allow_eos, all_greedy)

    def predict(self, slots, all_greedy: bool):
        talker = self.tts.talker
        c0 = self.c0[slots]
        c0 = c0.masked_fill((c0 == self.eos) | (c0 == FAULT), 0)   # not seen on the host yet: its frame is dropped
        params = self.sampling.batch(slots, "sub_", self.frames[slots], all_greedy)
        codes = torch.cat([c0[:, None], talker.code_predictor(self.hidden[slots], talker.embed_codec(c0), params)], 1)
        self.frame_embed[slots] = talker.embed_frame(codes)
        self.frames[slots] += 1
        return codes

    def decode(self, slots, codes):
        return self.codec.decoder.decode(codes[:, None], slots).float()
