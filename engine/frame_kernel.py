"""A whole frame of the code predictor for a few streams as one persistent Triton kernel.

At one stream a frame is 15 dependent passes of 5 layers plus a head and a draw each: ~600 kernels of a few
microseconds, each paying its launch, its first memory latency and its tail, while the weights it reads (157 MB a
pass) would stream in ~53 us. Here one program per SM runs every stage in turn with grid-wide barriers between
them, and each stage first sends this program's share of the next stage's weights towards L2, so the weights stream
while the barrier and the small products of this stage run. The stages are the separate kernels' own device
functions (skinny.py's tiles, dense_attention.py's attention, row_sampler.py's draw), so the arithmetic, and the
codes, are theirs."""
import torch

from . import row_sampler, skinny
from .skinny import triton

if triton is not None:
    import triton.language as tl

    from .dense_attention import _dense_group
    from .row_sampler import _sample_row
    from .skinny import _linear_tile, _qk_norm_rope

MAX_STREAMS = skinny.TILE_ROWS // 2      # the first pass has two rows a stream: one 16-row tile
USE_KERNEL = True                        # False: the pass-by-pass path (equivalence checks, benchmarks)
PROGRAMS = 0                             # programs in the grid (0: one per SM); all must be resident at once
PREFETCH = True                          # the next stage's weights towards L2 at each stage's start
WARPS = 8
BLOCK_N, BLOCK_K = 16, 512                 # a tile takes K in up to 512-column loads: many bytes in flight
SPIN_LIMIT = 1 << 26                     # a barrier waiting longer sets sync[2] and goes on instead of hanging

if triton is not None:
    @triton.jit
    def _sync(sync_ptr, NPROG: tl.constexpr, SPIN: tl.constexpr):
        """Grid-wide barrier: sync[0] counts arrivals, the last one resets it and bumps the generation sync[1].
        The others poll with plain loads (atomics from every SM would queue on one address), then acquire once."""
        if NPROG > 1:
            tl.debug_barrier()                                   # the whole program's writes precede its arrival
            gen = tl.load(sync_ptr + 1, volatile=True)
            if tl.atomic_add(sync_ptr, 1, sem="acq_rel") == NPROG - 1:
                tl.atomic_xchg(sync_ptr, 0, sem="relaxed")
                tl.atomic_add(sync_ptr + 1, 1, sem="release")
            spins = 0
            while (tl.load(sync_ptr + 1, volatile=True) == gen) & (spins < SPIN):
                spins += 1
            if spins >= SPIN:
                tl.atomic_xchg(sync_ptr + 2, 1)
            tl.atomic_add(sync_ptr + 1, 0, sem="acquire")         # the others' writes are visible from here on
            tl.debug_barrier()

    @triton.jit
    def _prefetch(w_ptr, numel, pid, NPROG: tl.constexpr, ON: tl.constexpr):
        """This program's share of w[:numel] towards L2, one request per 128-byte line."""
        if ON:
            LINE: tl.constexpr = 1024 // w_ptr.dtype.element_ty.primitive_bitwidth
            share = tl.cdiv(numel, NPROG)
            for start in range(pid * share, tl.minimum(pid * share + share, numel), 256 * LINE):
                at = w_ptr + tl.minimum(start + tl.arange(0, 256) * LINE, numel - 1)
                tl.inline_asm_elementwise("prefetch.global.L2 [$1]; mov.u32 $0, 0;", "=r,l", [at], dtype=tl.int32,
                                          is_pure=False, pack=1)

    @triton.jit
    def _frame_kernel(e_ptr, x_ptr, qkv_ptr, q_ptr, k_ptr, o_ptr, mid_ptr, logits_ptr, ck_ptr, cv_ptr, scratch_ptr,
                      codes_ptr, sync_ptr, proj_w, proj_b, ln1_w, qkv_w, qn_w, kn_w, o_w, ln2_w, gu_w, down_w, norm_w,
                      head_w, emb_w, cos_ptr, sin_ptr, greedy_ptr, temperature_ptr, top_k_ptr, top_p_ptr, seed_ptr,
                      counter_ptr, B, eps, scale,
                      HT: tl.constexpr, HP: tl.constexpr, HEADS: tl.constexpr, KV_HEADS: tl.constexpr,
                      D: tl.constexpr, INTER: tl.constexpr, LAYERS: tl.constexpr, GROUPS: tl.constexpr,
                      V: tl.constexpr, PROJ: tl.constexpr, NPROG: tl.constexpr, BN: tl.constexpr, BK_HT: tl.constexpr,
                      BK_HP: tl.constexpr, BK_O: tl.constexpr, BK_I: tl.constexpr,
                      IEEE: tl.constexpr, FEW: tl.constexpr, MAX_B: tl.constexpr, PREFETCH: tl.constexpr, SPIN: tl.constexpr):
        pid = tl.program_id(0)
        ROWS: tl.constexpr = 16
        QKV: tl.constexpr = (HEADS + 2 * KV_HEADS) * D
        POSITIONS: tl.constexpr = 16
        GROUP: tl.constexpr = HEADS // KV_HEADS
        cache = B * POSITIONS * KV_HEADS * D                     # one layer's dense cache
        m = tl.arange(0, ROWS)[:, None]
        for j in range(GROUPS):              # pass j: the first takes (hidden, codebook 0) at positions 0 and 1
            n = tl.where(j == 0, 2, 1)
            start = tl.where(j == 0, 0, j + 1)
            rows = B * n
            if PROJ:                                             # the pass's input rows into the predictor's width
                _prefetch(qkv_w, QKV * HP, pid, NPROG, PREFETCH)
                for t0 in range(0, HP // BN, NPROG):
                    t = t0 + pid
                    if t < HP // BN:
                        _linear_tile(t, e_ptr, proj_w, proj_w, proj_b, x_ptr, x_ptr, rows, HP, HT, HT, eps, False, False,
                                     True, False, ROWS, BN, BK_HT, IEEE)
                _sync(sync_ptr, NPROG, SPIN)
            for layer in range(LAYERS):
                _prefetch(o_w + layer * HP * HEADS * D, HP * HEADS * D, pid, NPROG, PREFETCH)
                for t0 in range(0, QKV // BN, NPROG):
                    t = t0 + pid
                    if t < QKV // BN:
                        _linear_tile(t, x_ptr, ln1_w + layer * HP, qkv_w + layer * QKV * HP, proj_b, x_ptr, qkv_ptr, rows,
                                     QKV, HP, HP, eps, True, False, False, False, ROWS, BN, BK_HP, IEEE)
                _sync(sync_ptr, NPROG, SPIN)
                _prefetch(gu_w + layer * 2 * INTER * HP, 2 * INTER * HP, pid, NPROG, PREFETCH)
                for g0 in range(0, KV_HEADS, NPROG):            # a KV head: its q/k heads normed and rotated, then
                    g = g0 + pid
                    if g < KV_HEADS:
                        for h in range(GROUP + 1):                   # every stream's attention of its query heads
                            head = tl.where(h < GROUP, g * GROUP + h, HEADS + g)
                            _qk_norm_rope(head, qkv_ptr, qn_w + layer * D, kn_w + layer * D, cos_ptr, sin_ptr, q_ptr,
                                          k_ptr, rows, QKV, (m % n + start) * D, eps, HEADS, KV_HEADS, D, ROWS)
                        tl.debug_barrier()
                        for b in range(MAX_B):
                            if b < B:
                                _dense_group(b, g, q_ptr, k_ptr, qkv_ptr + (HEADS + KV_HEADS) * D, ck_ptr + layer * cache,
                                             cv_ptr + layer * cache, o_ptr, start, n, scale, KV_HEADS * D, QKV,
                                             POSITIONS * KV_HEADS * D, KV_HEADS, GROUP, D, 2, ROWS, POSITIONS, IEEE)
                _sync(sync_ptr, NPROG, SPIN)
                _prefetch(down_w + layer * HP * INTER, HP * INTER, pid, NPROG, PREFETCH)
                for t0 in range(0, HP // BN, NPROG):
                    t = t0 + pid
                    if t < HP // BN:
                        _linear_tile(t, o_ptr, proj_b, o_w + layer * HP * HEADS * D, proj_b, x_ptr, x_ptr, rows, HP,
                                     HEADS * D, HEADS * D, eps, False, False, False, True, ROWS, BN, BK_O, IEEE)
                _sync(sync_ptr, NPROG, SPIN)
                if layer + 1 < LAYERS:
                    _prefetch(qkv_w + (layer + 1) * QKV * HP, QKV * HP, pid, NPROG, PREFETCH)
                else:
                    _prefetch(head_w + j * V * HP, V * HP, pid, NPROG, PREFETCH)
                for t0 in range(0, INTER // BN, NPROG):
                    t = t0 + pid
                    if t < INTER // BN:
                        _linear_tile(t, x_ptr, ln2_w + layer * HP, gu_w + layer * 2 * INTER * HP, proj_b, x_ptr, mid_ptr,
                                     rows, INTER, HP, HP, eps, True, True, False, False, ROWS, BN, BK_HP, IEEE)
                _sync(sync_ptr, NPROG, SPIN)
                for t0 in range(0, HP // BN, NPROG):
                    t = t0 + pid
                    if t < HP // BN:
                        _linear_tile(t, mid_ptr, proj_b, down_w + layer * HP * INTER, proj_b, x_ptr, x_ptr, rows, HP,
                                     INTER, INTER, eps, False, False, False, True, ROWS, BN, BK_I, IEEE)
                _sync(sync_ptr, NPROG, SPIN)
            if PROJ:
                _prefetch(proj_w, HP * HT, pid, NPROG, PREFETCH)
            else:
                _prefetch(qkv_w, QKV * HP, pid, NPROG, PREFETCH)
            for t0 in range(0, V // BN, NPROG):                 # final norm + head j on each stream's last row
                t = t0 + pid
                if t < V // BN:
                    _linear_tile(t, x_ptr + (n - 1) * HP, norm_w, head_w + j * V * HP, proj_b, x_ptr, logits_ptr, B, V,
                                 HP, n * HP, eps, True, False, False, False, ROWS, BN, BK_HP, IEEE)
            _sync(sync_ptr, NPROG, SPIN)
            for b0 in range(0, MAX_B, NPROG):                       # draw codebook j + 1; its embedding is the next input
                b = b0 + pid
                if b < B:
                    code = _sample_row(b, logits_ptr, V, greedy_ptr, temperature_ptr, top_k_ptr, top_p_ptr, seed_ptr,
                                       counter_ptr, scratch_ptr, V, j + 1, V, FEW)
                    tl.store(codes_ptr + b * GROUPS + j, code)
                    if j + 1 < GROUPS:
                        cols = tl.arange(0, HT)
                        tl.store(e_ptr + b * HT + cols, tl.load(emb_w + (j * V + code) * HT + cols))
            _sync(sync_ptr, NPROG, SPIN)


class FrameKernel:
    """The predictor's weights as stacks for the kernel, its barrier's counters, and the launch."""

    def __init__(self, predictor):
        from .layers import restack
        self.p, body = predictor, predictor.model
        self.heads = restack([head.weight for head in predictor.lm_head])
        self.embeddings = restack([e.weight for e in body.codec_embedding])
        self.proj = predictor.small_to_mtp_projection
        self.stacks = body.stacks
        device = self.heads.device
        self.sync = torch.zeros(4, dtype=torch.int32, device=device)
        self.sms = torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 0

    @staticmethod
    def fits(cfg, talker_hidden: int, vocab: int) -> bool:
        """The kernel's shapes: whole tiles, power-of-two rows of the tables."""
        pow2 = lambda v: v & (v - 1) == 0
        return (all(d % BLOCK_N == 0 for d in (cfg.hidden_size, cfg.intermediate_size, vocab)) and pow2(talker_hidden)
                and pow2(vocab) and pow2(cfg.head_dim) and cfg.head_dim >= 16 and cfg.num_heads % cfg.num_kv_heads == 0
                and vocab <= 4096)

    def __call__(self, hidden: torch.Tensor, c0_embed: torch.Tensor, sampling):
        b, ht = hidden.shape
        if not (USE_KERNEL and skinny.MAX_ROWS and b <= MAX_STREAMS and (hidden.is_cuda or skinny.INTERPRET)):
            return NotImplemented
        cfg, s = self.p.cfg, self.stacks
        groups, vocab, hp = self.heads.shape
        heads, kv_heads, d = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
        rows, dt = skinny.TILE_ROWS, hidden.dtype
        new = lambda *shape, dtype=dt: torch.empty(*shape, dtype=dtype, device=hidden.device)
        proj = isinstance(self.proj, torch.nn.Linear)
        x = new(rows, hp)
        e = new(rows, ht) if proj else x
        e[:2 * b] = torch.stack((hidden, c0_embed), dim=1).reshape(2 * b, ht)
        codes = new(b, groups, dtype=torch.int64)
        cos, sin = self.p.rotary.table(dt, hidden.device)
        programs = PROGRAMS or self.sms or 1           # the interpreter runs programs one after another: one
        _frame_kernel[(programs,)](
            e, x, new(rows, (heads + 2 * kv_heads) * d), new(rows, heads * d), new(rows, kv_heads * d),
            new(rows, heads * d), new(rows, cfg.intermediate_size), new(rows, vocab),
            new(cfg.num_layers, b, 16, kv_heads, d), new(cfg.num_layers, b, 16, kv_heads, d),
            new(b, row_sampler.FEW, dtype=torch.int64), codes, self.sync,
            self.proj.weight if proj else x, self.proj.bias if proj else x, s["ln1"], s["qkv"], s["q_norm"],
            s["k_norm"], s["o"], s["ln2"], s["gate_up"], s["down"], self.p.model.norm.weight, self.heads,
            self.embeddings, cos, sin, sampling.greedy, sampling.temperature, sampling.top_k, sampling.top_p,
            sampling.seed, sampling.counter, b, self.p.model.norm.eps, d ** -0.5,
            HT=ht, HP=hp, HEADS=heads, KV_HEADS=kv_heads, D=d, INTER=cfg.intermediate_size, LAYERS=cfg.num_layers,
            GROUPS=groups, V=vocab, PROJ=proj, NPROG=programs, BN=BLOCK_N, BK_HT=min(ht, BLOCK_K), BK_HP=min(hp, BLOCK_K),
            BK_O=min(heads * d, BLOCK_K), BK_I=min(cfg.intermediate_size, BLOCK_K), IEEE=dt == torch.float32,
            FEW=row_sampler.FEW, MAX_B=MAX_STREAMS, PREFETCH=PREFETCH and not skinny.INTERPRET, SPIN=SPIN_LIMIT, num_warps=WARPS, num_stages=1)
        return codes
