"""Runs the model stages for a batch of sequences. Per-stream device state lives in slot-indexed buffers."""
import torch

from .kv_cache import PagedKVCache
from .prompt import Prompt
from .sampling import SamplingBatch, process_talker_logits, sample


class ModelRunner:
    def __init__(self, model, max_seqs: int, kv_blocks: int, block_size: int = 16):
        self.model, self.cfg = model, model.cfg
        tcfg, device, dtype = self.cfg.talker, model.device, model.dtype
        self.talker = model.tts.talker
        self.kv = PagedKVCache(tcfg, kv_blocks, block_size, dtype, device)
        self.hidden = torch.zeros(max_seqs, tcfg.hidden_size, dtype=dtype, device=device)
        self.frame_embed = torch.zeros_like(self.hidden)
        self.c0 = torch.zeros(max_seqs, dtype=torch.int64, device=device)
        self.seen = torch.zeros(max_seqs, tcfg.vocab_size, dtype=torch.bool, device=device)
        ids = self.cfg.codec_ids
        self.eos = ids["eos"]
        self.suppress = torch.zeros(tcfg.vocab_size, dtype=torch.bool, device=device)
        self.suppress[tcfg.vocab_size - 1024:] = True          # control ids: only codes 0-2047 and EOS remain
        self.suppress[self.eos] = False
        self.device = device
        self.codec = model.codec.decoder
        self.codec.allocate(max_seqs)

    def _slots(self, seqs):
        return torch.tensor([s.slot for s in seqs], dtype=torch.int64, device=self.device)

    def _sample_c0(self, seqs, slots, hidden):
        sp = [s.request.sampling for s in seqs]
        logits = self.talker.logits(hidden)
        logits = process_talker_logits(
            logits, self.seen[slots],
            torch.tensor([p.repetition_penalty for p in sp], device=self.device),
            torch.tensor([s.eos_allowed for s in seqs], device=self.device), self.suppress, self.eos)
        params = SamplingBatch.build([(not p.do_sample, p.temperature, p.top_k, p.top_p, s.seed, s.num_c0)
                                      for p, s in zip(sp, seqs)], self.device)
        c0 = sample(logits, params, codebook=0)
        self.c0[slots] = c0
        self.seen[slots, c0] = True
        self.hidden[slots] = hidden
        for s in seqs:
            s.num_c0 += 1
            s.has_c0 = True
        return c0

    @torch.inference_mode()
    def prefill(self, seqs, prompts: list[Prompt]) -> None:
        counts = [p.rows.shape[0] for p in prompts]
        for s, n in zip(seqs, counts):
            self.kv.grow(s, n)
        self.kv.prepare(seqs, counts)
        positions = torch.cat([torch.arange(n, device=self.device) for n in counts])
        h = self.talker(torch.cat([p.rows for p in prompts]), positions, self.kv)
        last = torch.tensor(counts, device=self.device).cumsum(0) - 1
        for s, n in zip(seqs, counts):
            s.num_tokens += n
            self.seen[s.slot] = False
        self._sample_c0(seqs, self._slots(seqs), h[last])

    @torch.inference_mode()
    def predict(self, seqs) -> torch.Tensor:
        """Complete each sequence's frame: [B, 16] codes (device)."""
        slots = self._slots(seqs)
        c0 = self.c0[slots]
        sp = [s.request.sampling for s in seqs]
        params = SamplingBatch.build([(not p.subtalker_do_sample, p.subtalker_temperature, p.subtalker_top_k,
                                       p.subtalker_top_p, s.seed, s.frames) for p, s in zip(sp, seqs)], self.device)
        rest = self.talker.code_predictor(self.hidden[slots], self.talker.embed_codec(c0), params)
        codes = torch.cat([c0[:, None], rest], dim=1)
        self.frame_embed[slots] = self.talker.embed_frame(codes)
        for s in seqs:
            s.has_c0 = False
        return codes

    @torch.inference_mode()
    def talk(self, seqs, text_ids: list[int]) -> list[int]:
        """One talker step: last frame's codes + a text row -> next codebook-0 id per sequence (host)."""
        slots = self._slots(seqs)
        for s in seqs:
            self.kv.grow(s, 1)
        self.kv.prepare(seqs, [1] * len(seqs))
        x = self.frame_embed[slots] + self.talker.embed_text(torch.tensor(text_ids, device=self.device))
        positions = torch.tensor([s.num_tokens for s in seqs], device=self.device)
        h = self.talker(x, positions, self.kv)
        for s in seqs:
            s.num_tokens += 1
        return self._sample_c0(seqs, slots, h).tolist()

    @torch.inference_mode()
    def start_audio(self, seqs) -> None:
        """Fresh codec-decoder state for new streams; a voice clone's reference frames become its context."""
        self.codec.reset(self._slots(seqs))
        for s in seqs:
            if s.voice.ref_codes is not None:
                self.codec.prime(s.voice.ref_codes.to(self.device)[None], self._slots([s]))

    @torch.inference_mode()
    def decode_audio(self, seqs, codes: torch.Tensor):
        """codes [B, T, 16] continuing each stream -> float32 PCM [B, T*1920] on the host."""
        return self.codec.decode(codes, self._slots(seqs)).float().cpu().numpy()
