"""Runs the model stages for a batch of sequences.

Every stream owns a slot: its hidden state, pending codebook-0 id, repetition mask, sampling parameters,
counters and codec-decoder state live in slot-indexed device buffers, so a stage needs only the slots of
its batch. The per-frame stages (predict, talk, decode) are pure tensor functions: eager on the CPU,
captured as CUDA graphs per batch bucket on the GPU. Slot `max_seqs` is scratch for padding rows."""
import math

import torch

from engine.core.graphs import StagedGraphs, buckets_up_to
from engine.core.kv_cache import PagedKVCache
from engine.core.prefill import prefill_runs
from engine.models.qwen3_tts.prompt import Prompt
from engine.kernels.registry import ops
from engine.models.sampling import FAULT, SamplingBatch, guard, sample
from engine.core.transfer import HostCopy, upload

MAX_CONTEXT = 8192 + 1024          # frames budget + a long prompt
PREFILL_BUCKETS = [8, 16, 32, 64, 128, 256, 512, 1024, 2048]     # tokens per prefill graph; larger runs eagerly


class ModelRunner:
    def __init__(self, model, max_seqs: int, kv_blocks: int | None, block_size: int = 16,
                 use_graphs: bool | None = None, side_decode: bool = False):
        """kv_blocks None: the cache is allocated later (allocate_kv), once what the stages need is measured."""
        self.model, self.cfg, self.device = model, model.cfg, model.device
        tcfg, dtype = self.cfg.talker, model.dtype
        self.talker = model.tts.talker
        self.max_blocks = math.ceil(MAX_CONTEXT / block_size)
        n = max_seqs + 1
        self.scratch, self.block_size = max_seqs, block_size
        self.allocate_kv(kv_blocks or 0)
        z = lambda *shape, dt=dtype: torch.zeros(*shape, dtype=dt, device=self.device)
        self.hidden, self.frame_embed = z(n, tcfg.hidden_size), z(n, tcfg.hidden_size)
        self.c0, self.num_c0, self.frames = z(n, dt=torch.int64), z(n, dt=torch.int64), z(n, dt=torch.int64)
        self.frame_codes = z(n, self.cfg.num_code_groups, dt=torch.int64)     # a step's codes, for the decode
        self.seen = z(n, tcfg.vocab_size, dt=torch.bool)
        self.params = {k: z(n, dt=dt) for k, dt in (
            ("greedy", torch.bool), ("temperature", torch.float32), ("top_k", torch.int64), ("top_p", torch.float32),
            ("sub_greedy", torch.bool), ("sub_temperature", torch.float32), ("sub_top_k", torch.int64),
            ("sub_top_p", torch.float32), ("seed", torch.int64), ("penalty", torch.float32))}
        self.eos = self.cfg.codec_ids["eos"]
        self.true = torch.ones((), dtype=torch.bool, device=self.device)
        self.suppress = z(tcfg.vocab_size, dt=torch.bool)
        self.suppress[tcfg.vocab_size - 1024:] = True               # control ids: only codes 0-2047 and EOS remain
        self.suppress[self.eos] = False
        self.codec = model.codec.decoder
        self.codec.allocate(n)
        graphs = self.device.type == "cuda" if use_graphs is None else use_graphs
        buckets = buckets_up_to(max_seqs)
        s, pool = self.scratch, torch.cuda.graph_pool_handle() if graphs else None   # one memory pool for all
        self.predict_stage = StagedGraphs(self._predict_core, [s], buckets, graphs, pool)
        self.talk_stage = StagedGraphs(self._talk_core, [s, 0, 0, False], buckets, graphs, pool)
        # The codec decodes a step's frames on a stream of its own, beside the talker step queued after it.
        self.codec_stream = torch.cuda.Stream(self.device, priority=-100) if graphs and side_decode else None
        side = self.codec_stream is not None
        self.decode_stage = StagedGraphs(self._decode_core, [s, 0], buckets, graphs,
                                         torch.cuda.graph_pool_handle() if side else pool,
                                         torch.cuda.Stream(self.device) if side else None)
        self.first_stage = StagedGraphs(self._first_core, [s, 0], buckets, graphs, pool)
        self.prefill_stage = StagedGraphs(self._prefill_core, [0, s, 0], PREFILL_BUCKETS, graphs, pool)

    def _tensor(self, values, dtype=torch.int64):
        return upload(values, dtype, self.device)

    def allocate_kv(self, blocks: int) -> None:
        """The paged cache of `blocks` blocks and a scratch block; before the graphs are captured (they hold its
        address)."""
        self.kv = None
        self.kv = PagedKVCache(self.cfg.talker, blocks + 1, self.block_size, self.scratch + 1, self.max_blocks,
                               self.model.dtype, self.device)

    def _stage_inputs(self) -> list:
        """(stage, variant, empty inputs) of every graph variant: what capture and profiling run."""
        i64 = lambda *shape: torch.zeros(0, *shape, dtype=torch.int64, device=self.device)
        flag = torch.zeros(0, dtype=torch.bool, device=self.device)
        rows = torch.zeros(0, self.cfg.talker.hidden_size, dtype=self.model.dtype, device=self.device)
        variants = [(stage, greedy, like) for greedy in (False, True) for stage, like in (
            (self.predict_stage, [i64()]), (self.talk_stage, [i64(), i64(), i64(), flag]),
            (self.first_stage, [i64(), rows]))]
        return variants + [(self.decode_stage, None, [i64(), i64(16)]),
                           (self.prefill_stage, None, [rows, i64(), i64()])]

    @torch.inference_mode()
    def capture_all(self) -> None:
        """Capture every stage for every batch bucket up front, so no stream pays for a capture. Largest first: a
        smaller graph then fits in the memory a larger one freed in their shared pool (smallest first, each larger
        one would grow the pool by nearly its whole size)."""
        graphs = [(bucket, stage, variant, like) for stage, variant, like in self._stage_inputs()
                  for bucket in stage.buckets]
        for bucket, stage, variant, like in sorted(graphs, key=lambda g: -g[0]):
            stage.capture(variant, bucket, like)

    @torch.inference_mode()
    def graph_bytes(self) -> int:
        """Device memory the captured graphs will hold: each stage run once, eagerly, at its largest bucket. The
        decode's graphs have a pool of their own beside the others' shared one."""
        peaks = {}
        for stage, variant, like in self._stage_inputs():
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            stage.fn(variant, *stage.pad(like, stage.buckets[-1]))
            torch.cuda.synchronize()
            peaks[stage] = max(peaks.get(stage, 0), torch.cuda.max_memory_allocated() - base)
        torch.cuda.empty_cache()
        return peaks.pop(self.decode_stage) + max(peaks.values())

    # per-stream setup ------------------------------------------------------------------------------------------
    @torch.inference_mode()
    def start(self, seqs) -> None:
        """New streams: sampling parameters into their slots, fresh codec state (a clone's reference primed)."""
        self.join_decode()                   # a slot's last decode (its previous stream's) may still run
        slots = self._tensor([s.slot for s in seqs])
        for key, values in zip(self.params, zip(*[self.param_row(s.request.sampling, s.seed) for s in seqs])):
            self.params[key][slots] = upload(values, self.params[key].dtype, self.device)
        self.seen[slots] = False
        self.num_c0[slots] = 0
        self.frames[slots] = 0
        self.codec.reset(slots)
        clones = [s for s in seqs if s.voice.ref_codes is not None]
        if clones:
            self._load_primed(clones)

    def _load_primed(self, seqs) -> None:
        """Clone streams start from their voice's codec state after its reference frames: primed once per voice (in
        the scratch slot, kept by the Voice), then copied into the slots of all the streams that start now."""
        voices = list({id(s.voice): s.voice for s in seqs}.values())
        for v in voices:
            if v.codec_state is None:
                v.codec_state = self.codec.primed_state(upload(v.ref_codes, device=self.device),
                                                        self._tensor([self.scratch]))
        which = self._tensor([voices.index(s.voice) for s in seqs])
        self.codec.load(self._tensor([s.slot for s in seqs]),
                        [torch.cat(rows)[which] for rows in zip(*(v.codec_state for v in voices))])

    @staticmethod
    def param_row(p, seed: int) -> tuple:
        """A stream's sampling parameters in the order of `self.params`."""
        return (not p.do_sample, p.temperature, p.top_k, p.top_p, not p.subtalker_do_sample, p.subtalker_temperature,
                p.subtalker_top_k, p.subtalker_top_p, seed, p.repetition_penalty)

    def _sampling(self, slots, prefix: str, counter, all_greedy: bool) -> SamplingBatch:
        g = lambda k: self.params[prefix + k][slots]
        return SamplingBatch(g("greedy"), g("temperature"), g("top_k"), g("top_p"), self.params["seed"][slots],
                             counter, all_greedy)

    # stages ----------------------------------------------------------------------------------------------------
    def _sample_c0(self, slots, hidden, allow_eos, all_greedy: bool):
        logits = ops.process_talker_logits(self.talker.logits(hidden), self.seen[slots], self.params["penalty"][slots],
                                       allow_eos, self.suppress, self.eos)
        c0 = sample(logits, self._sampling(slots, "", self.num_c0[slots], all_greedy), codebook=0)
        self.seen.index_put_((slots, c0), self.true)
        c0 = guard(logits, c0)
        self.c0[slots] = c0
        self.hidden[slots] = hidden
        self.num_c0[slots] += 1
        return c0

    def _predict_core(self, all_greedy, slots):
        c0 = self.c0[slots]
        c0 = c0.masked_fill((c0 == self.eos) | (c0 == FAULT), 0)   # not seen on the host yet: its frame is dropped
        params = self._sampling(slots, "sub_", self.frames[slots], all_greedy)
        codes = torch.cat([c0[:, None], self.talker.code_predictor(self.hidden[slots], self.talker.embed_codec(c0),
                                                                    params)], dim=1)
        self.frame_embed[slots] = self.talker.embed_frame(codes)
        self.frames[slots] += 1
        return codes

    def _talk_core(self, all_greedy, slots, text_ids, positions, allow_eos):
        self.kv.locate(slots, positions, one_per_stream=True)
        x = self.frame_embed[slots] + self.talker.embed_text(text_ids)
        return self._sample_c0(slots, self.talker(x, positions, self.kv), allow_eos, all_greedy)

    def _first_core(self, all_greedy, slots, hidden):
        """A new stream's first codebook-0 id, from its prompt's last hidden state (EOS never comes first)."""
        return self._sample_c0(slots, hidden, torch.zeros_like(slots, dtype=torch.bool), all_greedy)

    def _prefill_core(self, _, rows, stream_slots, positions):
        self.kv.locate(stream_slots, positions)
        return self.talker(rows, positions, self.kv)

    def _decode_core(self, _, slots, codes):
        return self.codec.decode(codes[:, None], slots).float()

    # batch entry points ----------------------------------------------------------------------------------------
    @torch.inference_mode()
    def prefill(self, seqs, prompts: list[Prompt]) -> None:
        """Prompts into the KV cache and each stream's first codebook-0 id. The scheduler took their blocks when it
        chose them. Prefixes not cached yet are prefilled first (each through a table row of its own), then each
        stream gets its copy of its prefix's partial block and prefills only its own rows."""
        new = list({id(s.cached_prefix): (s.cached_prefix, p.prefix_rows) for s, p in zip(seqs, prompts)
                     if not s.cached_prefix.filled}.values())
        if new:
            rows = self.kv.prefix_table_rows([entry for entry, _ in new])
            prefill_runs(self.prefill_stage, [(row, 0, make()) for row, (_, make) in zip(rows, new)], self.device)
            for entry, _ in new:
                entry.filled = True
        self.kv.copy_partial_blocks(seqs)
        self.kv.sync_tables(seqs)
        last = prefill_runs(self.prefill_stage, [(s.slot, s.num_tokens, p.rows) for s, p in zip(seqs, prompts)],
                            self.device)
        for s, p in zip(seqs, prompts):
            s.num_tokens += p.rows.shape[0]
            s.num_c0 += 1
            s.has_c0 = True
        self.first_stage(self._all_greedy(seqs), self._tensor([s.slot for s in seqs]), last)

    @staticmethod
    def _all_greedy(seqs, sub: bool = False) -> bool:
        return all(not (s.request.sampling.subtalker_do_sample if sub else s.request.sampling.do_sample) for s in seqs)

    @torch.inference_mode()
    def predict(self, seqs) -> torch.Tensor:
        """Complete each sequence's frame: [B, 16] codes (device)."""
        for s in seqs:
            s.has_c0 = False
        return self.predict_stage(self._all_greedy(seqs, sub=True), self._tensor([s.slot for s in seqs]))

    @torch.inference_mode()
    def talk(self, seqs, text_ids: list[int]) -> torch.Tensor:
        """One talker step: last frame's codes + a text row -> next codebook-0 id per sequence (device).
        The caller has taken the KV block for the new token."""
        self.kv.sync_tables(seqs)
        c0 = self.talk_stage(self._all_greedy(seqs), self._tensor([s.slot for s in seqs]), self._tensor(text_ids),
                             self._tensor([s.num_tokens for s in seqs]),
                             self._tensor([s.eos_allowed for s in seqs], torch.bool))
        for s in seqs:
            s.num_tokens += 1
            s.num_c0 += 1
            s.has_c0 = True
        return c0

    @torch.inference_mode()
    def decode(self, seqs, codes: torch.Tensor) -> HostCopy:
        """One new frame per stream [B, 16] -> its codes and float32 PCM [B, 1920], on their way to the host."""
        slots = self._tensor([s.slot for s in seqs])
        if self.codec_stream is None:
            return HostCopy(codes, self.decode_stage(None, slots, codes))
        # Out of the graph pool first: the talker graph that runs beside the decode may reuse the predict graph's
        # output memory (graphs of one pool assume they never overlap). The last decode must have read its codes.
        self.join_decode()
        codes = self.frame_codes[:len(seqs)].copy_(codes)
        self.codec_stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.codec_stream):
            out = HostCopy(codes, self.decode_stage(None, slots, codes))
        slots.record_stream(self.codec_stream)
        return out

    def join_decode(self) -> None:
        """Work queued from now on follows the last decode. Only what touches its inputs waits (the next decode's
        codes, a new stream's codec state): the next predict and talker step run beside its tail."""
        if self.codec_stream is not None:
            torch.cuda.current_stream().wait_stream(self.codec_stream)
