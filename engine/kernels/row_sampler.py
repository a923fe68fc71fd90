"""sampling.py's `sample_rows` as one Triton program per row, drawing the same ids as the torch path."""
import torch

try:
    import triton
    import triton.language as tl
except ImportError:
    triton = None

MAX_VOCAB = 4096          # a whole row in registers
FEW = 64

if triton is not None:
    @triton.jit
    def _mix(x):
        x = x ^ (x >> 16)
        x = (x * 0x45D9F3B) & 0xFFFFFFFF
        x = x ^ (x >> 16)
        x = (x * 0x45D9F3B) & 0xFFFFFFFF
        return x ^ (x >> 16)

    @triton.jit
    def _flip(bits):
        """float32 bits <-> int32 keys in the floats' order (its own inverse)."""
        return bits ^ ((bits >> 31) & 0x7FFFFFFF)

    @triton.jit
    def _race(token, probs, base, fallback):
        """NaN probabilities draw `fallback`, never a padding id."""
        golden = tl.full(token.shape, 0x9E3779B1, tl.int64)
        bits = _mix((base ^ ((token.to(tl.int64) * golden) & 0xFFFFFFFF)) & 0xFFFFFFFF)
        u = ((bits >> 9).to(tl.float32) + 0.5) / 8388608.0
        race = tl.where(probs > 0, probs / -tl.log(u), 0.0)
        choice = tl.argmax(race, 0, tie_break_left=True)
        return tl.where(tl.max(race, 0) > 0, tl.sum(tl.where(tl.arange(0, token.shape[0]) == choice, token, 0), 0),
                        fallback)

    @triton.jit
    def _draw_ranked(ranked, k, top_p, base, best, BLOCK: tl.constexpr):
        r = tl.arange(0, ranked.shape[0])
        values = tl.where(r < k, _flip((ranked >> 32).to(tl.int32)).to(tl.float32, bitcast=True), float("-inf"))
        weights = tl.exp(values - tl.max(values, 0))
        probs = weights / tl.sum(weights, 0)
        before = tl.cumsum(probs, 0) - probs
        probs = tl.where((before >= top_p) & (r > 0), 0.0, probs)
        return _race(BLOCK - 1 - (ranked & 0xFFFFFFFF).to(tl.int32), probs, base, best)

    @triton.jit
    def _sample_kernel(logits_ptr, stride, greedy_ptr, temperature_ptr, top_k_ptr, top_p_ptr, seed_ptr, counter_ptr,
                       scratch_ptr, out_ptr, V, codebook, BLOCK: tl.constexpr, FEW: tl.constexpr):
        row = tl.program_id(0)
        i = tl.arange(0, BLOCK)
        x = tl.load(logits_ptr + row * stride + i, mask=i < V, other=float("-inf")).to(tl.float32)
        x = tl.where(x == x, x, float("inf"))           # NaN ranks first, as in torch's sort and argmax
        best = tl.argmax(x, 0, tie_break_left=True)
        scaled = x / tl.maximum(tl.load(temperature_ptr + row), 1e-5)
        scaled = tl.where(scaled == 0.0, 0.0, scaled)                     # -0.0 ranks as 0.0 does
        high = _flip(scaled.to(tl.int32, bitcast=True)).to(tl.int64)
        top_k = tl.load(top_k_ptr + row)
        k = tl.where((top_k > 0) & (top_k < V), top_k, V)
        lo, hi = tl.min(high, 0), tl.max(high, 0)
        for _ in range(32):
            mid = (lo + hi + 1) >> 1
            enough = tl.sum((high >= mid).to(tl.int32), 0) >= k
            lo, hi = tl.where(enough, mid, lo), tl.where(enough, hi, mid - 1)
        tie = high == lo
        kept = (high > lo) | (tie & (tl.cumsum(tie.to(tl.int32), 0) <= k - tl.sum((high > lo).to(tl.int32), 0)))
        seed = tl.load(seed_ptr + row).to(tl.int64)
        base = _mix((_mix(seed & 0xFFFFFFFF) + tl.load(counter_ptr + row).to(tl.int64) * 17 + codebook) & 0xFFFFFFFF)
        top_p = tl.load(top_p_ptr + row)
        key = (high << 32) | (BLOCK - 1 - i).to(tl.int64)                 # unique: ties go to the lower id
        if top_p >= 1.0:          # no cut by rank: the race needs no sort
            values = tl.where(kept, scaled, float("-inf"))
            weights = tl.exp(values - tl.max(values, 0))
            drawn = _race(i, weights / tl.sum(weights, 0), base, best)
        elif k <= FEW:
            slot = tl.cumsum(kept.to(tl.int32), 0) - 1
            tl.store(scratch_ptr + row * FEW + slot, key, mask=kept)
            tl.debug_barrier()
            j = tl.arange(0, FEW)
            few = tl.load(scratch_ptr + row * FEW + j, mask=j < k, other=-0x7FFFFFFFFFFFFFFF)
            drawn = _draw_ranked(tl.sort(few, descending=True), k, top_p, base, best, BLOCK)
        else:
            drawn = _draw_ranked(tl.sort(key, descending=True), k, top_p, base, best, BLOCK)
        tl.store(out_ptr + row, tl.where(tl.load(greedy_ptr + row), best, drawn).to(tl.int64))


def fits(logits, *_) -> bool:
    return logits.shape[1] <= MAX_VOCAB and logits.is_floating_point() and logits.stride(1) == 1


def sample_rows(logits, greedy, temperature, top_k, top_p, seed, counter, codebook: int):
    rows, vocab = logits.shape
    out = torch.empty(rows, dtype=torch.int64, device=logits.device)
    scratch = torch.empty(rows, FEW, dtype=torch.int64, device=logits.device)
    block = triton.next_power_of_2(vocab)
    _sample_kernel[(rows,)](logits, logits.stride(0), greedy, temperature, top_k, top_p, seed, counter, scratch, out,
                            vocab, codebook, BLOCK=block, FEW=FEW, num_warps=8 if block > 2048 else 4)
    return out
