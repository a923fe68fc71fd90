"""Runs the model's stages on slot-indexed device state; slot `max_active` is scratch for padding rows. It reads the
streams the scheduler planned and writes none of their state."""
import math
import time
from collections import Counter

import torch

from engine.core.gpu_timeline import GpuTimeline
from engine.core.graphs import StagedGraphs, buckets_up_to, decode_buckets_up_to
from engine.core.kv_cache import PagedKVCache
from engine.core.plan import Talk
from engine.core.prefill import prefill_runs
from engine.core.transfer import HostCopy, upload
from engine.models.base import Prompt

MAX_CONTEXT = 8192 + 1024
PREFILL_BUCKETS = [8, 16, 32, 64, 128, 256, 512, 1024, 2048]


class ModelRunner:
    def __init__(self, model, max_active: int, kv_blocks: int | None, block_size: int = 16,
                 use_graphs: bool | None = None, side_decode: bool = False, kv_dtype: torch.dtype | None = None):
        """kv_blocks None: allocate_kv later, once the stages' memory is measured; kv_dtype None: the model's."""
        self.model, self.device, self.kv_dtype = model, model.device, kv_dtype or model.dtype
        self.max_blocks = math.ceil(MAX_CONTEXT / block_size)
        n = max_active + 1
        self.scratch, self.block_size = max_active, block_size
        self.allocate_kv(kv_blocks or 0)
        self.frame_codes = torch.zeros(n, model.audio.num_codebooks, dtype=torch.int64, device=self.device)
        model.allocate(n)
        graphs = self.device.type == "cuda" if use_graphs is None else use_graphs
        buckets = buckets_up_to(max_active, graphs=graphs)
        s, pool = self.scratch, torch.cuda.graph_pool_handle() if graphs else None
        self.predict_stage = StagedGraphs(self._predict_core, [s], buckets, graphs, pool)
        self.talk_stage = StagedGraphs(self._talk_core, [s, 0, 0, False], buckets, graphs, pool)
        self.codec_stream = torch.cuda.Stream(self.device, priority=-100) if graphs and side_decode else None
        side = self.codec_stream is not None
        self.decode_stage = StagedGraphs(self._decode_core, [s, 0], decode_buckets_up_to(max_active, graphs), graphs,
                                         torch.cuda.graph_pool_handle() if side else pool,
                                         torch.cuda.Stream(self.device) if side else None, split=True, warm_each=True)
        self.first_stage = StagedGraphs(self._first_core, [s, 0], buckets, graphs, pool)
        self.prefill_stage = StagedGraphs(self._prefill_core, [0, s, 0], PREFILL_BUCKETS, graphs, pool)
        self.timeline = GpuTimeline(self.device.type == "cuda")
        self.decoding: set[int] = set()      # the slots of the decode in flight beside the main stream

    def _tensor(self, values, dtype=torch.int64):
        return upload(values, dtype, self.device)

    def allocate_kv(self, blocks: int) -> None:
        """Before capture: the graphs hold its address."""
        self.kv = None
        self.kv = PagedKVCache(self.model.kv_layout, blocks + 1, self.block_size, self.scratch + 1, self.max_blocks,
                               self.kv_dtype, self.device)

    def _stage_inputs(self) -> list:
        i64 = lambda *shape: torch.zeros(0, *shape, dtype=torch.int64, device=self.device)
        flag = torch.zeros(0, dtype=torch.bool, device=self.device)
        rows = torch.zeros(0, self.model.hidden_size, dtype=self.model.dtype, device=self.device)
        variants = [(stage, variant, like) for variant, _ in self.model.graph_variants for stage, like in (
            (self.predict_stage, [i64()]), (self.talk_stage, [i64(), i64(), i64(), flag]),
            (self.first_stage, [i64(), rows]))]
        return variants + [(self.decode_stage, None, [i64(), i64(self.model.audio.num_codebooks)]),
                           (self.prefill_stage, None, [rows, i64(), i64()])]

    def limit_batch(self, most: int) -> None:
        """No batch grows past `most` streams (what the KV cache admits): larger buckets are never captured."""
        if most < self.scratch:
            graphs = self.decode_stage.use_graphs
            for stage in (self.predict_stage, self.talk_stage, self.first_stage):
                stage.buckets = buckets_up_to(most, graphs=graphs)
            self.decode_stage.buckets = decode_buckets_up_to(most, graphs)

    @torch.inference_mode()
    def capture_all(self) -> tuple[Counter, Counter]:
        """Largest first, so smaller graphs reuse the shared pool's memory; -> seconds and graphs per stage."""
        names = {self.predict_stage: "predict", self.talk_stage: "talk", self.first_stage: "first",
                 self.decode_stage: "decode", self.prefill_stage: "prefill"}
        most = {variant: rows for variant, rows in self.model.graph_variants}
        graphs = [(bucket, stage, variant, like) for stage, variant, like in self._stage_inputs()
                  for bucket in stage.buckets if most.get(variant) is None or bucket <= most[variant]]
        seconds, counts = Counter(), Counter()
        for bucket, stage, variant, like in sorted(graphs, key=lambda g: -g[0]):
            t0 = time.perf_counter()
            stage.capture(variant, bucket, like)
            seconds[names[stage]] += time.perf_counter() - t0
            counts[names[stage]] += 1
        return seconds, counts

    @torch.inference_mode()
    def graph_bytes(self) -> int:
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

    @torch.inference_mode()
    def start(self, seqs) -> None:
        """Only a slot whose previous stream is still decoding, or a reset on the scratch slot, waits for the decode
        in flight: under churn a step admits streams every time, and the wait kept the decode from running beside
        the next step's prefill and predict."""
        slots = [s.slot for s in seqs]
        if self.decoding.intersection(slots) or self.model.reset_uses_scratch(seqs):
            self.join_decode()
        with self.timeline.stage("start"):
            self.model.reset(self._tensor(slots), seqs)

    def _predict_core(self, variant, slots):
        return self.model.predict(slots, variant)

    def _talk_core(self, variant, slots, text_ids, positions, allow_eos):
        self.kv.locate(slots, positions, one_per_stream=True)
        return self.model.talk(slots, text_ids, positions, allow_eos, self.kv, variant)

    def _first_core(self, variant, slots, hidden):
        return self.model.first(slots, hidden, variant)

    def _prefill_core(self, _, rows, stream_slots, positions):
        self.kv.locate(stream_slots, positions)
        return self.model.prefill(rows, positions, self.kv)

    def _decode_core(self, _, slots, codes):
        return self.model.decode(slots, codes)

    @torch.inference_mode()
    def prefill(self, seqs, prompts: list[Prompt]) -> None:
        """Each prompt's rows go in after its prefix, then its first frame's first code is drawn; a prompt that is a
        talk row only gets its prefix and blocks here (the talk that follows takes its row)."""
        with self.timeline.stage("prefill"):
            self._prefill(seqs, prompts)

    def _prefill(self, seqs, prompts: list[Prompt]) -> None:
        new = list({id(s.kv.cached_prefix): (s.kv.cached_prefix, p.prefix_rows) for s, p in zip(seqs, prompts)
                     if not s.kv.cached_prefix.filled}.values())
        if new:
            rows = self.kv.prefix_table_rows([entry for entry, _ in new])
            prefill_runs(self.prefill_stage, [(row, 0, make()) for row, (_, make) in zip(rows, new)], self.device)
            for entry, _ in new:
                entry.filled = True
        self.kv.copy_partial_blocks(seqs)
        self.kv.sync_tables(seqs)
        rest = [(s, p) for s, p in zip(seqs, prompts) if p.talk_id is None]
        if rest:
            seqs = [s for s, _ in rest]
            last = prefill_runs(self.prefill_stage, [(s.slot, s.kv.cached_prefix.length, p.rows) for s, p in rest],
                                self.device)
            self.first_stage(self.model.variant("first", seqs), self._tensor([s.slot for s in seqs]), last)

    @torch.inference_mode()
    def predict(self, seqs) -> torch.Tensor:
        with self.timeline.stage("predict"):
            return self.predict_stage(self.model.variant("predict", seqs), self._tensor([s.slot for s in seqs]))

    @torch.inference_mode()
    def talk(self, talk: Talk) -> torch.Tensor:
        """The scheduler has taken the KV blocks for the new tokens."""
        seqs = talk.seqs
        self.kv.sync_tables(seqs)
        with self.timeline.stage("talk"):
            return self.talk_stage(self.model.variant("talk", seqs), self._tensor([s.slot for s in seqs]),
                                   self._tensor(talk.text_ids), self._tensor(talk.positions),
                                   self._tensor(talk.allow_eos, torch.bool))

    @torch.inference_mode()
    def decode(self, seqs, codes: torch.Tensor) -> HostCopy:
        slots = self._tensor([s.slot for s in seqs])
        if self.codec_stream is None:
            codes = codes.clone()           # the decode graph shares the pool that holds the predict graph's output
            with self.timeline.stage("decode"):
                return HostCopy(codes, self.decode_stage(None, slots, codes))
        # the talk graph beside the decode may reuse the predict output's memory
        self.join_decode()
        self.decoding = {s.slot for s in seqs}          # before the launch: a decode that raises may have run some
        codes = self.frame_codes[:len(seqs)].copy_(codes)
        self.codec_stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.codec_stream), self.timeline.stage("decode", side=True):
            out = HostCopy(codes, self.decode_stage(None, slots, codes))
        slots.record_stream(self.codec_stream)
        return out

    def join_decode(self) -> None:
        """Work queued from now on follows the last decode."""
        if self.codec_stream is not None:
            torch.cuda.current_stream().wait_stream(self.codec_stream)
        self.decoding = set()
